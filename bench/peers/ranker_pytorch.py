#!/usr/bin/env python3
"""The PyTorch peer of `topspin bench train-ranker`: the same ranker, loss and
optimizer settings written the way a PyTorch user would.

Model: bottom MLP over the 48 dense features, one nn.Embedding(sparse=True)
per sparse feature (4 hashed tables of 2^18 x E and 2 bucket tables),
concatenation, top MLP, one score per product. Loss: listwise softmax with
targets 2^label - 1, per list, padded to the longest list. Optimizers: AdamW
for dense parameters, SparseAdam for the embeddings. Data: the shop transform
of pipeline_pytorch.py (same spec JSON) through a DataLoader.

Prints one JSON object: {"docs_per_s", "seconds", "docs", "ndcg10", "epochs"}.
usage: ranker_pytorch.py TRAIN_CSV VALID_CSV SPEC_JSON [--epochs 1] [--batch 64]
       [--embedding-dim 16] [--lr 3e-3] [--threads 2] [--seed 0]
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
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline_pytorch import ShopQueries, collate  # noqa: E402
from rank_metrics import ndcg_at  # noqa: E402


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


def evaluate(model, dataset, device):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for dense, sparse, labels, offsets in DataLoader(dataset, batch_size=256,
                                                         collate_fn=collate):
            scores = model(dense.to(device), sparse.to(device)).cpu().numpy()
            o = offsets.numpy()
            for i in range(len(o) - 1):
                total += ndcg_at(scores[o[i]:o[i + 1]], labels.numpy()[o[i]:o[i + 1]])
    model.train()
    return total / len(dataset)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("valid")
    ap.add_argument("spec")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--embedding-dim", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    args = ap.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    spec = json.load(open(args.spec))
    train = ShopQueries(pandas.read_csv(args.train), spec)
    valid = ShopQueries(pandas.read_csv(args.valid), spec)
    sizes = [b["buckets"] + 1 for b in spec["bucketize"]] + [h["slots"] for h in spec["hash"]]
    model = Ranker(2 * len(spec["dense"]), sizes, args.embedding_dim).to(device)
    dense_params = [p for n, p in model.named_parameters() if not n.startswith("tables")]
    sparse_params = list(model.tables.parameters())
    opt_dense = torch.optim.AdamW(dense_params, lr=args.lr, weight_decay=0.0)
    opt_sparse = torch.optim.SparseAdam(sparse_params, lr=args.lr)
    loader = DataLoader(train, batch_size=args.batch, shuffle=True, collate_fn=collate,
                        drop_last=True, generator=torch.Generator().manual_seed(args.seed),
                        pin_memory=cuda)
    docs = 0
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
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    print(json.dumps({"docs_per_s": docs / seconds, "seconds": seconds, "docs": docs,
                      "ndcg10": evaluate(model, valid, device), "epochs": args.epochs}))


if __name__ == "__main__":
    main()
