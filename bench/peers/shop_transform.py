"""The "shop transform" as a skilled NumPy user writes it: one gather and one
vectorised transform per batch, shared by the pipeline and ranker peers.

The constants (impute values, log1p, standardize mean and 1/std, clip
bounds, bucket edges, hash seeds and slots) come from the spec JSON that
`topspin bench` writes from the same resolved feature chains our pipeline
runs, so the two compute the same function; `check` proves it on a sample.

Output layout, as ours: dense [N, 2F] (value, missing flag per column, in
spec order), sparse [N, C] int64 (bucket ids, then hashed ids), labels [N]
float32 and offsets [B + 1] int64 (jagged lists).
"""
import json

import numpy as np

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


def load_spec(path):
    with open(path) as f:
        return json.load(f)


class ShopColumns:
    """The raw inputs as contiguous matrices (rows in dataset order), and the
    transform's constants as vectors, so a batch is a few whole-array ops."""

    def __init__(self, spec, dense, buckets, keys, label, group):
        self.spec = spec
        self.dense = np.ascontiguousarray(dense, dtype=np.float32)      # [rows, F], NaN = null
        self.buckets = np.ascontiguousarray(buckets, dtype=np.float32)  # [rows, 2], NaN = null
        self.keys = np.ascontiguousarray(keys, dtype=np.uint64)         # [rows, H], null key
        self.label = np.ascontiguousarray(label, dtype=np.float32)
        self.starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1], True]).astype(np.int64)
        d = spec["dense"]
        self.fill = np.array([c["fill"] for c in d], np.float32)
        self.log = np.array([c["log1p"] for c in d], bool)
        self.mean = np.array([c["mean"] for c in d], np.float32)
        self.inv_std = np.array([c["inv_std"] for c in d], np.float32)
        self.lo = np.array([c["lo"] for c in d], np.float32)
        self.hi = np.array([c["hi"] for c in d], np.float32)
        self.edges = [np.array(b["edges"], np.float32) for b in spec["bucketize"]]
        self.nulls = [b["buckets"] for b in spec["bucketize"]]
        self.seeds = np.array([h["seed"] for h in spec["hash"]], np.uint64)
        self.slots = np.array([h["slots"] for h in spec["hash"]], np.uint64)

    @classmethod
    def from_frame(cls, frame, spec):
        keys = []
        for h in spec["hash"]:
            v = frame[h["column"]]
            keys.append(np.where(v.isna().to_numpy(), NULL_KEY,
                                 v.fillna(0).to_numpy(np.int64).astype(np.uint64)))
        return cls(spec,
                   frame[[c["column"] for c in spec["dense"]]].to_numpy(np.float32),
                   frame[[b["column"] for b in spec["bucketize"]]].to_numpy(np.float32),
                   np.stack(keys, 1), frame[spec["label"]].to_numpy(np.float32),
                   frame[spec["group"]].to_numpy())

    @classmethod
    def from_arrow(cls, table, spec):
        """From a pyarrow Table (one Parquet row group): nulls become NaN or
        the null hash key, as in from_frame."""
        def floats(name):
            return table.column(name).to_numpy().astype(np.float32)  # nulls -> NaN

        keys = []
        for h in spec["hash"]:
            c = table.column(h["column"])
            k = c.fill_null(0).to_numpy().astype(np.int64).astype(np.uint64)
            keys.append(np.where(c.is_null().to_numpy(), NULL_KEY, k))
        return cls(spec, np.stack([floats(c["column"]) for c in spec["dense"]], 1),
                   np.stack([floats(b["column"]) for b in spec["bucketize"]], 1),
                   np.stack(keys, 1), floats(spec["label"]),
                   table.column(spec["group"]).to_numpy())

    def __len__(self):
        return len(self.starts) - 1

    def batch(self, queries):
        """The transformed batch of these queries (in this order): one gather
        of their rows, then whole-batch array ops."""
        queries = np.asarray(queries, np.int64)
        begin = self.starts[queries]
        lengths = self.starts[queries + 1] - begin
        offsets = np.zeros(len(queries) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        rows = np.repeat(begin - offsets[:-1], lengths) + np.arange(offsets[-1])
        return self.transform(rows) + (offsets,)

    def transform(self, rows):
        x = self.dense[rows]
        missing = np.isnan(x)
        np.copyto(x, self.fill, where=missing)
        logged = x[:, self.log]
        x[:, self.log] = np.copysign(np.log1p(np.abs(logged)), logged)
        x -= self.mean
        x *= self.inv_std
        np.clip(x, self.lo, self.hi, out=x)
        dense = np.empty((len(rows), 2 * x.shape[1]), np.float32)
        dense[:, 0::2] = x
        dense[:, 1::2] = missing
        n = len(self.edges)
        sparse = np.empty((len(rows), n + len(self.seeds)), np.int64)
        b = self.buckets[rows]
        for i, edges in enumerate(self.edges):
            v = b[:, i]
            sparse[:, i] = np.where(np.isnan(v), self.nulls[i],
                                    np.searchsorted(edges, v, side="right"))
        sparse[:, n:] = (mix64(self.keys[rows] ^ self.seeds) % self.slots).view(np.int64)
        return dense, sparse, self.label[rows]


def check(columns, ours_prefix, queries):
    """Compares our first batches (files written by `topspin bench`:
    PREFIX.dense.f32, .sparse.i64, .labels.f32, .offsets.i64, queries
    0..queries-1 in order) with this transform of the same queries. Returns
    the largest differences; raises when they are not the same function."""
    dense, sparse, labels, offsets = columns.batch(np.arange(queries))
    ours = {k: np.fromfile(f"{ours_prefix}.{k}.{t}", d)
            for k, t, d in (("dense", "f32", np.float32), ("sparse", "i64", np.int64),
                            ("labels", "f32", np.float32), ("offsets", "i64", np.int64))}
    if not np.array_equal(ours["offsets"], offsets):
        raise SystemExit("check: the lists differ (offsets)")
    ours_dense = ours["dense"].reshape(dense.shape)
    diff = np.abs(ours_dense.astype(np.float64) - dense)
    tol = 1e-6 * np.maximum(1.0, np.abs(dense))
    result = {"docs": int(len(labels)), "lists": int(queries),
              "dense_max_abs_diff": float(diff.max()),
              "dense_over_tolerance": int((diff > tol).sum()),
              "sparse_mismatches": int((ours["sparse"].reshape(sparse.shape) != sparse).sum()),
              "label_mismatches": int((ours["labels"] != labels).sum())}
    if result["dense_over_tolerance"] or result["sparse_mismatches"] or result["label_mismatches"]:
        raise SystemExit("check: our batches and the peer's differ: " + json.dumps(result))
    return result
