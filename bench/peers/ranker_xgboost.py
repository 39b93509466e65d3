#!/usr/bin/env python3
"""The gradient-boosted-trees peer of `topspin bench train-ranker`: XGBoost
rank:ndcg (XGBoost from PyPI, in the project's venv) on the raw gen shop features (trees
need no imputation, scaling or hashing; categorical ids are used as numbers).

Prints one JSON object: {"ndcg10", "seconds", "rounds", "depth"}. NDCG@10 uses
the same conventions as topspin (gain 2^label - 1, log2 discount, stable ties,
a list without relevant products scores 1).
usage: ranker_xgboost.py TRAIN_CSV VALID_CSV [--rounds 800] [--depth 8] [--threads 2]
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import pandas
import xgboost

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rank_metrics import ndcg_at  # noqa: E402


def load(path):
    frame = pandas.read_csv(path)
    qid = frame["qid"].to_numpy()
    label = frame["label"].to_numpy(np.float32)
    features = frame.drop(columns=["qid", "label"]).astype(np.float32).to_numpy()
    return qid, label, features


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("valid")
    ap.add_argument("--rounds", type=int, default=800)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    qid, label, x = load(args.train)
    vqid, vlabel, vx = load(args.valid)
    train = xgboost.DMatrix(x, label=label, qid=qid)
    valid = xgboost.DMatrix(vx, label=vlabel, qid=vqid)
    params = {"objective": "rank:ndcg", "max_depth": args.depth, "eta": 0.05,
              "tree_method": "hist", "nthread": args.threads, "eval_metric": "ndcg@10"}
    start = time.perf_counter()
    booster = xgboost.train(params, train, num_boost_round=args.rounds)
    seconds = time.perf_counter() - start
    scores = booster.predict(valid)
    starts = np.flatnonzero(np.r_[True, vqid[1:] != vqid[:-1], True])
    ndcg = np.mean([ndcg_at(scores[a:b], vlabel[a:b]) for a, b in zip(starts[:-1], starts[1:])])
    print(json.dumps({"ndcg10": float(ndcg), "seconds": seconds, "rounds": args.rounds,
                      "depth": args.depth}))


if __name__ == "__main__":
    main()
