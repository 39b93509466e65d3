#!/usr/bin/env python3
"""The benchmark peers' vectorised shop transform (bench/peers/shop_transform.py)
against a plain per-row reference, and its check against our batches: equal
batches pass, and a changed dense value, id, label or list boundary fails.

`topspin bench pipeline` runs that check on our real batches before it
times anything; this test proves the check itself can fail. NumPy only.
usage: peer_transform_test.py REPO_ROOT
"""
import math
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(sys.argv[1], "bench", "peers"))
from shop_transform import NULL_KEY, ShopColumns, check, mix64  # noqa: E402

SPEC = {
    "group": "qid", "label": "label",
    "dense": [{"column": "a", "fill": 0.5, "log1p": False, "mean": 0.25, "inv_std": 2.0,
               "lo": -5.0, "hi": 5.0},
              {"column": "b", "fill": 3.0, "log1p": True, "mean": 1.0, "inv_std": 0.5,
               "lo": -5.0, "hi": 5.0}],
    "bucketize": [{"column": "p", "buckets": 4, "edges": [1.0, 2.0, 3.0]}],
    "hash": [{"column": "k", "slots": 1 << 18, "seed": 12345},
             {"column": "j", "slots": 1000, "seed": 7}],
}


def make(rows, rng):
    dense = rng.normal(size=(rows, 2)).astype(np.float32) * 4
    dense[rng.random((rows, 2)) < 0.2] = np.nan
    buckets = (rng.random((rows, 1)) * 4).astype(np.float32)
    buckets[rng.random(rows) < 0.1, 0] = np.nan
    keys = rng.integers(0, 1 << 40, size=(rows, 2)).astype(np.uint64)
    keys[rng.random(rows) < 0.1, 0] = NULL_KEY
    group = np.repeat(np.arange(rows // 5 + 1), 5)[:rows]
    return ShopColumns(SPEC, dense, buckets, keys, rng.integers(0, 5, rows).astype(np.float32),
                       group)


def reference_row(cols, r):
    """One row, one value at a time, in float32 where ours is."""
    dense = []
    for i, c in enumerate(SPEC["dense"]):
        x = cols.dense[r, i]
        missing = math.isnan(x)
        x = np.float32(c["fill"]) if missing else x
        if c["log1p"]:
            x = np.float32(math.copysign(math.log1p(abs(float(x))), float(x)))
        x = (x - np.float32(c["mean"])) * np.float32(c["inv_std"])
        dense += [min(max(x, np.float32(c["lo"])), np.float32(c["hi"])), float(missing)]
    ids = []
    for i, b in enumerate(SPEC["bucketize"]):
        v = cols.buckets[r, i]
        ids.append(b["buckets"] if math.isnan(v) else sum(1 for e in b["edges"] if v >= e))
    for i, h in enumerate(SPEC["hash"]):
        ids.append(int(mix64(np.array([cols.keys[r, i] ^ np.uint64(h["seed"])]))[0]) % h["slots"])
    return dense, ids


def write(prefix, dense, sparse, labels, offsets):
    dense.astype(np.float32).tofile(prefix + ".dense.f32")
    sparse.astype(np.int64).tofile(prefix + ".sparse.i64")
    labels.astype(np.float32).tofile(prefix + ".labels.f32")
    offsets.astype(np.int64).tofile(prefix + ".offsets.i64")


def main():
    rng = np.random.default_rng(3)
    cols = make(2000, rng)
    queries = rng.permutation(len(cols))[:64]
    dense, sparse, labels, offsets = cols.batch(queries)
    rows = np.concatenate([np.arange(cols.starts[q], cols.starts[q + 1]) for q in queries])
    assert np.array_equal(np.diff(offsets), cols.starts[queries + 1] - cols.starts[queries])
    assert np.array_equal(labels, cols.label[rows])
    for at, r in enumerate(rows):
        want_dense, want_ids = reference_row(cols, r)
        np.testing.assert_allclose(dense[at], np.array(want_dense, np.float32), rtol=1e-6,
                                   atol=1e-6, err_msg=f"row {r}")
        assert list(sparse[at]) == want_ids, (r, list(sparse[at]), want_ids)

    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "ours")
        q = 100
        good = cols.batch(np.arange(q))
        write(prefix, *good)
        result = check(cols, prefix, q)
        assert result["dense_over_tolerance"] == 0 and result["sparse_mismatches"] == 0, result
        for name, change in [
                ("dense", lambda d, s, l, o: (d + np.where(np.arange(d.size).reshape(d.shape) == 7,
                                                          1e-3, 0), s, l, o)),
                ("sparse", lambda d, s, l, o: (d, s + (np.arange(s.size).reshape(s.shape) == 3), l, o)),
                ("labels", lambda d, s, l, o: (d, s, l + (np.arange(l.size) == 0), o)),
                ("offsets", lambda d, s, l, o: (d, s, l, o + (np.arange(o.size) == 1)))]:
            write(prefix, *change(*good))
            try:
                check(cols, prefix, q)
            except SystemExit as e:
                assert "differ" in str(e), (name, e)
            else:
                raise AssertionError(f"a changed {name} array passed the check")
    print("peer transform: vectorised = per-row reference; the check fails on each kind of change")


if __name__ == "__main__":
    main()
