#!/usr/bin/env python3
"""The peer of `topspin bench pipeline`: the "shop transform" workload written
the way a PyTorch user would write it.

A map-style Dataset of queries over in-memory numpy arrays, numpy transforms
per query (impute with missing flags, log1p of heavy-tailed counts,
standardize, clip, bucketize, hash), a collate_fn that packs lists jagged
(dense [N, F], sparse [N, C], labels [N], offsets [B + 1]) and
torch.utils.data.DataLoader with shuffle, for each num_workers asked.

Run under the project's venv (.venv/bin/python: torch 2.11, numpy, pandas;
scripts/install-deps.sh --bench). Statistics (means, stds, quantile edges) are computed from
the data before timing, as a user would. Prints one JSON object:
{"configs": [{"num_workers": w, "docs_per_s": ..., "seconds": ..., "docs": ...}], "best": ...}

usage: pipeline_pytorch.py CSV SPEC_JSON [--workers 0,1,2] [--batch 64] [--seed 0]
"""
import argparse
import json
import time

import numpy as np
import pandas
import torch
from torch.utils.data import DataLoader, Dataset

M1 = np.uint64(0xFF51AFD7ED558CCD)
M2 = np.uint64(0xC4CEB9FE1A85EC53)
S33 = np.uint64(33)
NULL_KEY = np.uint64(0x9E3779B97F4A7C15)


def mix64(x):
    """MurmurHash3's fmix64, as topspin's Mix64 (uint64 arithmetic wraps)."""
    x = x ^ (x >> S33)
    x = x * M1
    x = x ^ (x >> S33)
    x = x * M2
    return x ^ (x >> S33)


class ShopQueries(Dataset):
    def __init__(self, frame, spec):
        qid = frame[spec["group"]].to_numpy()
        self.starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1], True])
        self.label = frame[spec["label"]].to_numpy(np.float32)
        self.dense = []
        for d in spec["dense"]:
            v = frame[d["column"]].to_numpy(np.float64)
            present = v[~np.isnan(v)]
            fill = present.mean() if present.size else 0.0
            t = np.where(np.isnan(v), fill, v)
            if d["log1p"]:
                t = np.sign(t) * np.log1p(np.abs(t))
            mean, std = t.mean(), t.std()
            self.dense.append((v.astype(np.float32), np.float32(fill), d["log1p"],
                               np.float32(mean), np.float32(1.0 / std if std > 0 else 1.0)))
        self.buckets = []
        for b in spec["bucketize"]:
            v = frame[b["column"]].to_numpy(np.float64)
            present = v[~np.isnan(v)]
            edges = np.unique(np.quantile(present, np.arange(1, b["buckets"]) / b["buckets"]))
            self.buckets.append((v.astype(np.float32), edges.astype(np.float32), b["buckets"]))
        self.hashes = []
        for h in spec["hash"]:
            v = frame[h["column"]]
            keys = np.where(v.isna().to_numpy(), NULL_KEY,
                            v.fillna(0).to_numpy(np.int64).astype(np.uint64))
            self.hashes.append((keys, np.uint64(h["slots"])))
        self.seed = np.uint64(spec["seed"])
        self.clip = spec["clip"]

    def __len__(self):
        return len(self.starts) - 1

    def __getitem__(self, i):
        a, b = self.starts[i], self.starts[i + 1]
        cols = []
        for v, fill, log, mean, inv_std in self.dense:
            x = v[a:b]
            missing = np.isnan(x)
            x = np.where(missing, fill, x)
            if log:
                x = np.sign(x) * np.log1p(np.abs(x))
            x = np.clip((x - mean) * inv_std, -self.clip, self.clip)
            cols += [x, missing.astype(np.float32)]
        ids = []
        for v, edges, n in self.buckets:
            x = v[a:b]
            ids.append(np.where(np.isnan(x), n, np.searchsorted(edges, x, side="right")))
        for keys, slots in self.hashes:
            ids.append((mix64(keys[a:b] ^ self.seed) % slots).astype(np.int64))
        return (np.stack(cols, axis=1).astype(np.float32), np.stack(ids, axis=1).astype(np.int64),
                self.label[a:b])


def collate(items):
    lengths = [len(l) for _, _, l in items]
    offsets = torch.zeros(len(items) + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.tensor(lengths), 0)
    return (torch.from_numpy(np.concatenate([d for d, _, _ in items])),
            torch.from_numpy(np.concatenate([s for _, s, _ in items])),
            torch.from_numpy(np.concatenate([l for _, _, l in items])), offsets)


def measure(dataset, workers, batch, seed):
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers,
                        collate_fn=collate, drop_last=True,
                        generator=torch.Generator().manual_seed(seed),
                        persistent_workers=False)
    docs = 0
    start = time.perf_counter()
    for dense, sparse, labels, offsets in loader:
        docs += labels.shape[0]
    seconds = time.perf_counter() - start
    return {"num_workers": workers, "docs": docs, "seconds": seconds, "docs_per_s": docs / seconds}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("spec")
    ap.add_argument("--workers", default="0,1,2")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    spec = json.load(open(args.spec))
    dataset = ShopQueries(pandas.read_csv(args.csv), spec)
    configs = [measure(dataset, int(w), args.batch, args.seed) for w in args.workers.split(",")]
    best = max(configs, key=lambda c: c["docs_per_s"])
    print(json.dumps({"configs": configs, "best": best}))


if __name__ == "__main__":
    main()
