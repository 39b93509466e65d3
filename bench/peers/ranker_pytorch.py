#!/usr/bin/env python3
"""The PyTorch peer of `topspin bench train-ranker`: the same ranker, loss and
optimizer settings written the way a skilled PyTorch user would.

Model: bottom MLP over the 48 dense features, one nn.Embedding(sparse=True)
per sparse feature (4 hashed tables of 2^18 x E and 2 bucket tables),
concatenation, top MLP, one score per product. Loss: listwise softmax with
targets 2^label - 1, per list, padded to the longest list. Optimizers: AdamW
for dense parameters, SparseAdam for the embeddings. Data: the shop transform
of shop_transform.py (the spec JSON holds our resolved constants, from the
training data's statistics, for both sets), one gather and one vectorised
transform per batch through a DataLoader over a BatchSampler.

Loader workers and torch threads are chosen as a user tunes them: a short
trial (--trial-steps) of every pair in --workers x --threads-grid, then the
full run with the fastest pair.

Prints one JSON object: {"docs_per_s", "seconds", "docs", "ndcg10", "epochs",
"num_workers", "threads", "trials": [...]}.
usage: ranker_pytorch.py TRAIN_CSV VALID_CSV SPEC_JSON [--epochs 1] [--batch 64]
       [--embedding-dim 16] [--lr 3e-3] [--threads-grid 1,2] [--workers 0,1,2]
       [--trial-steps 60] [--seed 0]
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import pandas
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline_pytorch import memory_loader  # noqa: E402
from rank_metrics import ndcg_at  # noqa: E402
from shop_transform import ShopColumns, load_spec  # noqa: E402


class Ranker(nn.Module):
    def __init__(self, dense_dim, table_sizes, dim):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dense_dim, 64), nn.ReLU())
        self.tables = nn.ModuleList(nn.Embedding(n, dim, sparse=True) for n in table_sizes)
        width = 64 + dim * len(table_sizes)
        self.top = nn.Sequential(nn.Linear(width, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                                 nn.Linear(64, 1))

    def forward(self, dense, sparse):
        parts = [self.bottom(dense)] + [t(sparse[:, i]) for i, t in enumerate(self.tables)]
        return self.top(torch.cat(parts, 1)).squeeze(1)


def softmax_loss(scores, labels, offsets):
    lengths = offsets[1:] - offsets[:-1]
    b, l = len(lengths), int(lengths.max())
    list_id = torch.repeat_interleave(torch.arange(b), lengths)
    pos = torch.arange(len(scores)) - offsets[:-1][list_id]
    s = torch.full((b, l), float("-inf")).index_put((list_id, pos), scores)
    t = torch.zeros((b, l)).index_put((list_id, pos), torch.exp2(labels) - 1)
    logp = torch.log_softmax(s, 1).masked_fill(torch.isinf(s), 0)
    total = t.sum(1)
    per_list = -(t * logp).sum(1) / total.clamp_min(1e-12)
    valid = total > 0
    return per_list[valid].mean() if valid.any() else scores.sum() * 0


def evaluate(model, columns, device):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for at in range(0, len(columns), 256):
            dense, sparse, labels, o = columns.batch(np.arange(at, min(at + 256, len(columns))))
            scores = model(torch.from_numpy(dense).to(device),
                           torch.from_numpy(sparse).to(device)).cpu().numpy()
            for i in range(len(o) - 1):
                total += ndcg_at(scores[o[i]:o[i + 1]], labels[o[i]:o[i + 1]])
    model.train()
    return total / len(columns)


def train(columns, spec, args, device, workers, threads, max_steps):
    """Trains a fresh model; returns (model, docs, seconds)."""
    torch.set_num_threads(threads)
    torch.manual_seed(args.seed)
    cuda = device.type == "cuda"
    sizes = [b["buckets"] + 1 for b in spec["bucketize"]] + [h["slots"] for h in spec["hash"]]
    model = Ranker(2 * len(spec["dense"]), sizes, args.embedding_dim).to(device)
    dense_params = [p for n, p in model.named_parameters() if not n.startswith("tables")]
    sparse_params = list(model.tables.parameters())
    opt_dense = torch.optim.AdamW(dense_params, lr=args.lr, weight_decay=0.0)
    opt_sparse = torch.optim.SparseAdam(sparse_params, lr=args.lr)
    loader = memory_loader(columns, workers, args.batch, args.seed, pin_memory=cuda)
    docs, steps = 0, 0
    start = time.perf_counter()
    for _ in range(args.epochs):
        for batch in loader:
            dense, sparse, labels, offsets = (t.to(device, non_blocking=True) for t in batch)
            loss = softmax_loss(model(dense, sparse), labels, offsets)
            opt_dense.zero_grad()
            opt_sparse.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(dense_params, 1.0)
            opt_dense.step()
            opt_sparse.step()
            docs += len(labels)
            steps += 1
            if steps == max_steps:
                break
        if steps == max_steps:
            break
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    del loader
    return model, docs, seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("valid")
    ap.add_argument("spec")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--embedding-dim", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads-grid", default="1,2", help="torch threads to try")
    ap.add_argument("--workers", default="0,1,2", help="DataLoader num_workers to try")
    ap.add_argument("--trial-steps", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    args = ap.parse_args()
    device = torch.device(args.device)
    spec = load_spec(args.spec)
    columns = ShopColumns.from_frame(pandas.read_csv(args.train), spec)
    valid = ShopColumns.from_frame(pandas.read_csv(args.valid), spec)
    trials = []
    for w in (int(v) for v in args.workers.split(",")):
        for t in (int(v) for v in args.threads_grid.split(",")):
            _, docs, seconds = train(columns, spec, args, device, w, t, args.trial_steps)
            trials.append({"num_workers": w, "threads": t, "docs_per_s": docs / seconds})
    best = max(trials, key=lambda r: r["docs_per_s"])
    model, docs, seconds = train(columns, spec, args, device, best["num_workers"],
                                 best["threads"], -1)
    print(json.dumps({"docs_per_s": docs / seconds, "seconds": seconds, "docs": docs,
                      "ndcg10": evaluate(model, valid, device), "epochs": args.epochs,
                      "num_workers": best["num_workers"], "threads": best["threads"],
                      "trials": trials}))


if __name__ == "__main__":
    main()
