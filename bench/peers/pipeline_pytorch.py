#!/usr/bin/env python3
"""The peers of `topspin bench pipeline`: the "shop transform" workload as a
skilled PyTorch user writes it (shop_transform.py: one gather and one
vectorised transform per batch).

- memory: a map-style Dataset whose items are whole batches. A BatchSampler
  over a RandomSampler hands each fetch the 64 query indices of one batch
  (DataLoader(batch_size=None, sampler=BatchSampler(...))), so the workers
  run one gather and one transform call per batch, not one per query. The
  raw columns are in memory (CSV loading is not timed). num_workers 0, 1, 2
  with persistent workers; the best counts.
- parquet: the data is not held in memory. An IterableDataset reads Parquet
  row groups with pyarrow (zstd, the same rows per group as our shards) in
  a shuffled order, each worker its share, and shuffles the queries of each
  row group into batches, transformed as above. num_workers 0, 1, 2; the
  best counts. Writing the Parquet files is not timed.

Each configuration runs `--epochs` epochs (default 2) and reports the best
epoch's docs/s. `--check PREFIX` first proves that the transform equals
ours on our first batches (shop_transform.check).

Run under the project's venv (.venv/bin/python: torch 2.11, numpy, pandas,
pyarrow; scripts/install-deps.sh --bench). Prints one JSON object:
{"memory": {"configs": [...], "best": {...}}, "parquet": {...}, "check": {...}}

usage: pipeline_pytorch.py CSV SPEC_JSON [--workers 0,1,2] [--batch 64] [--seed 0]
       [--epochs 2] [--parquet-dir DIR --row-group-rows N] [--check PREFIX --check-queries Q]
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import pandas
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, IterableDataset, RandomSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shop_transform import ShopColumns, check, load_spec  # noqa: E402


def as_tensors(dense, sparse, labels, offsets):
    return (torch.from_numpy(dense), torch.from_numpy(sparse), torch.from_numpy(labels),
            torch.from_numpy(offsets))


class ShopBatches(Dataset):
    """Item = a list of query indices; returns their transformed batch."""

    def __init__(self, columns):
        self.columns = columns

    def __len__(self):
        return len(self.columns)

    def __getitem__(self, queries):
        return as_tensors(*self.columns.batch(queries))


def memory_loader(columns, workers, batch, seed, pin_memory=False):
    dataset = ShopBatches(columns)
    sampler = BatchSampler(RandomSampler(dataset, generator=torch.Generator().manual_seed(seed)),
                           batch_size=batch, drop_last=True)
    return DataLoader(dataset, batch_size=None, sampler=sampler, num_workers=workers,
                      persistent_workers=workers > 0, pin_memory=pin_memory)


class ParquetShopBatches(IterableDataset):
    """Row groups of Parquet files in a shuffled order (a new one each
    epoch), split over workers; each row group's queries shuffled into
    batches; the last partial batch of each row group is dropped (a global
    shuffle over data that is not in memory is not something a Parquet
    reader does)."""

    def __init__(self, files, spec, batch, seed):
        import pyarrow.parquet as pq
        self.files, self.spec, self.batch, self.seed = files, spec, batch, seed
        self.groups = [(f, g) for f in files for g in range(pq.ParquetFile(f).num_row_groups)]
        self.columns = sorted({c["column"] for c in spec["dense"]} |
                              {b["column"] for b in spec["bucketize"]} |
                              {h["column"] for h in spec["hash"]} |
                              {spec["label"], spec["group"]})
        self.epoch = 0

    def __iter__(self):
        import pyarrow.parquet as pq
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        rng = np.random.default_rng([self.seed, self.epoch])
        self.epoch += 1
        order = rng.permutation(len(self.groups))[worker::workers]
        handles = {}
        for k in order:
            path, g = self.groups[k]
            if path not in handles:
                handles[path] = pq.ParquetFile(path)
            table = handles[path].read_row_group(g, columns=self.columns, use_threads=False)
            cols = ShopColumns.from_arrow(table, self.spec)
            queries = rng.permutation(len(cols))
            for at in range(0, len(queries) - self.batch + 1, self.batch):
                yield as_tensors(*cols.batch(queries[at:at + self.batch]))


def parquet_loader(dataset, workers):
    return DataLoader(dataset, batch_size=None, num_workers=workers,
                      persistent_workers=workers > 0)


def write_parquet(frame, out_dir, row_group_rows):
    """The CSV's rows as Parquet (zstd), row groups of about our shards'
    size, queries never split across row groups."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(out_dir, exist_ok=True)
    qid = frame["qid"].to_numpy()
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1], True])
    cuts = [0]
    for s in starts[1:]:
        if s - cuts[-1] >= row_group_rows or s == starts[-1]:
            cuts.append(int(s))
    table = pa.Table.from_pandas(frame, preserve_index=False)
    path = os.path.join(out_dir, "part-00000.parquet")
    with pq.ParquetWriter(path, table.schema, compression="zstd") as w:
        for a, b in zip(cuts[:-1], cuts[1:]):
            w.write_table(table.slice(a, b - a), row_group_size=b - a)
    return [path]


def measure(make_loader, workers, epochs):
    loader = make_loader(workers)
    runs = []
    for _ in range(epochs):
        docs = 0
        start = time.perf_counter()
        for dense, sparse, labels, offsets in loader:
            docs += labels.shape[0]
        runs.append((docs / (time.perf_counter() - start), docs))
    del loader
    best = max(r[0] for r in runs)
    return {"num_workers": workers, "docs": runs[0][1], "docs_per_s": best,
            "epochs_docs_per_s": [r[0] for r in runs]}


def sweep(make_loader, workers, epochs):
    configs = [measure(make_loader, int(w), epochs) for w in workers.split(",")]
    return {"configs": configs, "best": max(configs, key=lambda c: c["docs_per_s"])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("spec")
    ap.add_argument("--workers", default="0,1,2")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--parquet-dir", default="")
    ap.add_argument("--row-group-rows", type=int, default=65536)
    ap.add_argument("--check", default="", help="prefix of our batch files to compare with")
    ap.add_argument("--check-queries", type=int, default=256)
    args = ap.parse_args()
    torch.set_num_threads(1)
    spec = load_spec(args.spec)
    frame = pandas.read_csv(args.csv)
    columns = ShopColumns.from_frame(frame, spec)
    out = {}
    if args.check:
        out["check"] = check(columns, args.check, args.check_queries)
    out["memory"] = sweep(lambda w: memory_loader(columns, w, args.batch, args.seed),
                          args.workers, args.epochs)
    if args.parquet_dir:
        import pyarrow.parquet as pq
        files = write_parquet(frame, args.parquet_dir, args.row_group_rows)
        first = ShopColumns.from_arrow(pq.read_table(files[0]), spec)
        if args.check:
            out["check_parquet"] = check(first, args.check, args.check_queries)
        del frame, first
        dataset = ParquetShopBatches(files, spec, args.batch, args.seed)
        out["parquet"] = sweep(lambda w: parquet_loader(dataset, w), args.workers, args.epochs)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
