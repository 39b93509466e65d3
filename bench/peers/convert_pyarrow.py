#!/usr/bin/env python3
"""The peers of `topspin bench convert`, as a skilled user writes them.

    convert_pyarrow.py write-parquet CSV OUT.parquet
        the CSV as zstd Parquet, as Spark or pyarrow writes it (untimed input)
    convert_pyarrow.py csv CSV SCRATCH --threads N --repeats R
        CSV -> NumPy arrays on disk: pandas.read_csv (C engine), pandas with
        engine="pyarrow", and pyarrow.csv.read_csv; the best counts
    convert_pyarrow.py parquet FILE SCRATCH --threads N --repeats R
        Parquet -> NumPy arrays on disk: pyarrow.parquet.read_table

Each timed run reads the whole file into columns, turns every column into a
NumPy array and writes the arrays with numpy.save (no compression, no
statistics, no checksums: less work than ours). Arrow's thread pools are
set to --threads. Timing is inside Python (no interpreter start-up), best of
--repeats after one warm-up. The last line is JSON: the best seconds and
which way won, and per column the rows, nulls and sum of finite values, so
the bench checks that the peer read what we read.
"""

import argparse
import json
import os
import time

import numpy
import pyarrow
import pyarrow.csv
import pyarrow.parquet


def column_summary(arrays):
    """Rows, nulls and the sum of finite values of every numeric or bool column."""
    out = {}
    for name, values in arrays.items():
        if values.dtype.kind not in "biuf" and values.dtype != object:
            continue
        if values.dtype == object:  # pandas' nullable bools come as objects
            try:
                values = values.astype(float)
            except (TypeError, ValueError):
                continue
        as_float = values.astype(numpy.float64)
        finite = numpy.isfinite(as_float)
        out[name] = {"rows": int(len(values)), "nulls": int(numpy.isnan(as_float).sum()),
                     "sum": float(as_float[finite].sum())}
    return out


def arrow_arrays(table):
    return {name: table.column(name).to_numpy() for name in table.column_names}


def save(arrays, scratch):
    for i, values in enumerate(arrays.values()):
        numpy.save(os.path.join(scratch, f"c{i}.npy"), values, allow_pickle=True)


def read_and_save(read, scratch):
    def run():
        arrays = read()
        save(arrays, scratch)
        return arrays
    return run


def best_of(repeats, fn):
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def csv_ways(path, threads):
    import pandas

    def pandas_c():
        frame = pandas.read_csv(path)
        return {name: frame[name].to_numpy() for name in frame.columns}

    def pandas_arrow():
        frame = pandas.read_csv(path, engine="pyarrow")
        return {name: frame[name].to_numpy() for name in frame.columns}

    def arrow():
        options = pyarrow.csv.ReadOptions(use_threads=threads > 1)
        return arrow_arrays(pyarrow.csv.read_csv(path, read_options=options))

    return {"pandas.read_csv": pandas_c, "pandas.read_csv(engine=pyarrow)": pandas_arrow,
            "pyarrow.csv.read_csv": arrow}


def parquet_ways(path, threads):
    def arrow():
        return arrow_arrays(pyarrow.parquet.read_table(path, use_threads=threads > 1))

    return {"pyarrow.parquet.read_table": arrow}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["write-parquet", "csv", "parquet"])
    p.add_argument("input")
    p.add_argument("out")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    pyarrow.set_cpu_count(a.threads)
    pyarrow.set_io_thread_count(a.threads)
    if a.mode == "write-parquet":
        table = pyarrow.csv.read_csv(a.input)
        pyarrow.parquet.write_table(table, a.out, compression="zstd")
        print(json.dumps({"rows": table.num_rows, "bytes": os.path.getsize(a.out)}))
        return
    os.makedirs(a.out, exist_ok=True)
    ways = (csv_ways if a.mode == "csv" else parquet_ways)(a.input, a.threads)
    results = {name: best_of(a.repeats, read_and_save(read, a.out)) for name, read in ways.items()}
    best = min(results, key=lambda name: results[name][0])
    print(json.dumps({"best": best, "seconds": results[best][0],
                      "all": {name: s for name, (s, _) in results.items()},
                      "columns": column_summary(results[best][1])}))


if __name__ == "__main__":
    main()
