#!/usr/bin/env python3
"""The gradient-boosted-trees peers of `topspin bench train-ranker`, as a
skilled user runs them: XGBoost `rank:ndcg` and LightGBM `lambdarank` (both
from PyPI, in the project's venv) on the raw gen shop features (trees need
no imputation, scaling or hashing), the id columns as categorical features
(XGBoost enable_categorical, LightGBM categorical_feature), early stopping
on the held-out set's NDCG@10, and the best of a small stated grid.

Selecting rounds and grid point on the set NDCG is reported on favours the
peer; that is deliberate (a stronger peer).

Prints one JSON object: {"ndcg10", "seconds", "library", "params", "rounds",
"grid": [...]} for --library xgboost or lightgbm. NDCG@10 uses topspin's
conventions (gain 2^label - 1, log2 discount, stable ties, a list without
relevant products scores 1).
usage: ranker_xgboost.py TRAIN_CSV VALID_CSV [--library xgboost|lightgbm]
       [--rounds 800] [--depths 8] [--leaves 63] [--etas 0.1]
       [--early-stop 50] [--threads 2]
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import pandas

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rank_metrics import ndcg_at  # noqa: E402

CATEGORICAL = ["brand", "category", "seller", "query_category"]


def load(train_path, valid_path):
    frames = [pandas.read_csv(p) for p in (train_path, valid_path)]
    for c in CATEGORICAL:  # integer ids, one category set for both, as a user builds it
        ids = [f[c].astype("Int64") for f in frames]
        kind = pandas.CategoricalDtype(np.union1d(ids[0].dropna().unique(),
                                                  ids[1].dropna().unique()).astype(np.int64))
        for f, v in zip(frames, ids):
            f[c] = v.astype(kind)
    out = []
    for f in frames:
        qid = f["qid"].to_numpy()
        out.append((qid, f["label"].to_numpy(np.float32), f.drop(columns=["qid", "label"])))
    return out


def mean_ndcg(scores, qid, label):
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1], True])
    return float(np.mean([ndcg_at(scores[a:b], label[a:b]) for a, b in zip(starts[:-1], starts[1:])]))


def group_sizes(qid):
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1], True])
    return np.diff(starts)


def run_xgboost(train, valid, depth, eta, args):
    import xgboost
    (qid, label, x), (vqid, vlabel, vx) = train, valid
    dtrain = xgboost.DMatrix(x, label=label, qid=qid, enable_categorical=True)
    dvalid = xgboost.DMatrix(vx, label=vlabel, qid=vqid, enable_categorical=True)
    params = {"objective": "rank:ndcg", "max_depth": depth, "eta": eta, "tree_method": "hist",
              "nthread": args.threads, "eval_metric": "ndcg@10", "max_cat_to_onehot": 1}
    booster = xgboost.train(params, dtrain, num_boost_round=args.rounds,
                            evals=[(dvalid, "valid")], early_stopping_rounds=args.early_stop,
                            verbose_eval=False)
    rounds = booster.best_iteration + 1
    scores = booster.predict(dvalid, iteration_range=(0, rounds))
    return {"max_depth": depth, "eta": eta}, rounds, scores


def run_lightgbm(train, valid, leaves, eta, args):
    import lightgbm
    (qid, label, x), (vqid, vlabel, vx) = train, valid
    dtrain = lightgbm.Dataset(x, label=label, group=group_sizes(qid),
                              categorical_feature=CATEGORICAL, free_raw_data=False)
    dvalid = lightgbm.Dataset(vx, label=vlabel, group=group_sizes(vqid), reference=dtrain)
    params = {"objective": "lambdarank", "metric": "ndcg", "eval_at": [10],
              "num_leaves": leaves, "learning_rate": eta, "num_threads": args.threads,
              "verbose": -1, "label_gain": [float(2 ** i - 1) for i in range(32)]}
    booster = lightgbm.train(params, dtrain, num_boost_round=args.rounds, valid_sets=[dvalid],
                             callbacks=[lightgbm.early_stopping(args.early_stop, verbose=False)])
    rounds = booster.best_iteration or args.rounds
    return {"num_leaves": leaves, "learning_rate": eta}, rounds, booster.predict(
        vx, num_iteration=rounds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("valid")
    ap.add_argument("--library", default="xgboost", choices=["xgboost", "lightgbm"])
    ap.add_argument("--rounds", type=int, default=800)
    ap.add_argument("--depths", default="8", help="XGBoost max_depth grid")
    ap.add_argument("--leaves", default="63", help="LightGBM num_leaves grid")
    ap.add_argument("--etas", default="0.1", help="learning-rate grid")
    ap.add_argument("--early-stop", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    train, valid = load(args.train, args.valid)
    sizes = args.depths if args.library == "xgboost" else args.leaves
    run = run_xgboost if args.library == "xgboost" else run_lightgbm
    grid = []
    for size in (int(v) for v in sizes.split(",")):
        for eta in (float(v) for v in args.etas.split(",")):
            start = time.perf_counter()
            params, rounds, scores = run(train, valid, size, eta, args)
            grid.append({"params": params, "rounds": rounds,
                         "seconds": time.perf_counter() - start,
                         "ndcg10": mean_ndcg(scores, valid[0], valid[1])})
    best = max(grid, key=lambda g: g["ndcg10"])
    print(json.dumps({"library": args.library, "ndcg10": best["ndcg10"],
                      "seconds": best["seconds"], "params": best["params"],
                      "rounds": best["rounds"], "grid": grid}))


if __name__ == "__main__":
    main()
