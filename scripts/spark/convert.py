#!/usr/bin/env python3
"""Convert raw ranking or tabular data into one topspin dataset on Spark.

    scripts/spark/convert.py raw/ --format csv --label label --group qid --out data/train
    spark-submit --master yarn scripts/spark/convert.py s3a://bucket/day=2026-12-01/ \\
        --format parquet --group qid --out /mnt/shared/data/train --work /mnt/shared/tmp

What it does, in order (docs/PARQUET.md, "On Spark"):

1. Sizes the job with `topspin plan cluster` (input bytes, nodes, cores and
   memory from the Spark configuration) and prints the plan; its partition
   count is the number of parts unless --partitions says otherwise.
2. Reads the input with Spark (CSV with a header, JSON Lines, or Parquet),
   repartitions it by the group key so that every group lands whole in one
   partition, sorts each partition by (group key, input position), and
   writes zstd Parquet to WORK/staged. CSV and JSON numbers are typed as
   `topspin convert` types them: integers int64, fractions float32
   (--float64 keeps doubles).
3. Runs `topspin convert WORK/staged --format parquet --part K/N` for every
   part K on the executors, one Spark task per part.
4. Merges the parts on the driver with `topspin dataset merge` into OUT.

The output equals a single-process `topspin convert` of WORK/staged (rows,
row groups, statistics) and holds the same groups with the same rows, in
the same order inside each group, as a convert of the raw input (`topspin
dataset diff --by-group` checks both; tests/spark_convert_test.sh does).

WORK and OUT must be on a filesystem that the driver and every executor
see at the same path (local disk in local mode; NFS, Lustre, EFS or a FUSE
mount on a cluster), and the topspin binary must be at the same path on
every node. The input may be anything Spark reads (hdfs://, s3a://...).
Run it with the Python that has pyspark (the project's .venv has it) or
under spark-submit; plain `python` starts Spark in local mode.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROW_ID = "__topspin_row"
ROW_FILE = "__topspin_file"


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Arguments after -- go to every `topspin convert` (e.g. -- --zstd-level 6).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files or directories Spark reads")
    p.add_argument("--format", choices=["csv", "jsonl", "parquet"],
                   help="input format (default: from the first input's extension; a directory "
                        "is parquet)")
    p.add_argument("--out", required=True, help="the dataset directory to create (must not exist)")
    p.add_argument("--label", help="the label column")
    p.add_argument("--group", help="the group (query id) column; groups are kept whole")
    p.add_argument("--columns",
                   help="`topspin convert --columns` on the staged Parquet: the columns to keep, "
                        "in order, each optionally :TYPE")
    p.add_argument("--schema",
                   help="CSV/JSON: the columns as a Spark DDL string ('qid BIGINT, label FLOAT, "
                        "...'), which skips Spark's pass over the input to infer them")
    p.add_argument("--float64", action="store_true",
                   help="keep CSV/JSON fractions as float64 (default float32, as topspin convert)")
    p.add_argument("--partitions", type=int,
                   help="parts to convert (default: what `topspin plan cluster` recommends)")
    p.add_argument("--master", help="Spark master when not under spark-submit (default local[*])")
    p.add_argument("--nodes", type=int, help="nodes, for the plan (default: from Spark's conf)")
    p.add_argument("--cores", type=int, help="cores per node, for the plan (default: from Spark)")
    p.add_argument("--memory", help="memory per node, for the plan (default: executor memory)")
    rate = p.add_mutually_exclusive_group()
    rate.add_argument("--core-rate", type=float, help="conversion MB/s per core, for the plan")
    rate.add_argument("--from-bench", help="a `topspin bench convert --json` file, for the plan")
    p.add_argument("--work", help="scratch directory (default OUT.spark-work), removed at the end")
    p.add_argument("--keep-work", action="store_true", help="keep WORK (staged Parquet, parts)")
    p.add_argument("--topspin", help="the topspin binary (default: on PATH, else build/topspin)")
    p.add_argument("--json", help="write stage times, sizes and rates to this file")
    args, convert_args = p.parse_known_args(argv)
    if convert_args and convert_args[0] == "--":
        convert_args = convert_args[1:]
    elif convert_args:
        p.error(f"unknown arguments {' '.join(convert_args)} (put topspin convert's after --)")
    args.convert_args = convert_args
    if args.format is None:
        first = args.inputs[0]
        ext = Path(first.rstrip("/")).suffix.lower()
        args.format = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl",
                       ".parquet": "parquet"}.get(ext, "parquet" if ext == "" else None)
        if args.format is None:
            p.error(f"{first}: cannot tell the format from '{ext}'; pass --format csv|jsonl|parquet")
    if args.partitions is not None and args.partitions < 1:
        p.error("--partitions must be at least 1")
    return args


def fail(message, hint=None):
    print(f"spark/convert.py: {message}" + (f"; hint: {hint}" if hint else ""), file=sys.stderr)
    sys.exit(2)


def find_topspin(given):
    if given:
        path = Path(given)
    else:
        on_path = shutil.which("topspin")
        path = Path(on_path) if on_path else ROOT / "build" / "topspin"
    if not path.is_file() or not os.access(path, os.X_OK):
        fail(f"no topspin binary at {path}", "build it (make) or pass --topspin PATH")
    return str(path.resolve())


def run_topspin(binary, args, what):
    """Runs topspin on the driver; a failure stops the job with its message."""
    done = subprocess.run([binary] + args, capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"{what} failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def input_bytes(spark, inputs):
    """Bytes under every input path, through Hadoop's FileSystem (any scheme Spark reads)."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    total = 0
    for name in inputs:
        path = jvm.org.apache.hadoop.fs.Path(name)
        try:
            total += path.getFileSystem(conf).getContentSummary(path).getLength()
        except Exception as e:  # py4j wraps FileNotFoundException
            fail(f"{name}: cannot read: {str(e).splitlines()[0]}", "check the path")
    return total


def cluster_shape(spark, args):
    """Nodes, cores per node and memory per node: given, else from the Spark conf."""
    conf = spark.sparkContext.getConf()
    master = spark.sparkContext.master
    if master.startswith("local"):
        nodes, cores = 1, spark.sparkContext.defaultParallelism
        memory = conf.get("spark.driver.memory", "1g")
    else:
        nodes = int(conf.get("spark.executor.instances", "1"))
        cores = int(conf.get("spark.executor.cores", "1"))
        memory = conf.get("spark.executor.memory", "1g")
    memory = memory.upper().rstrip("B") + "B" if memory[-1:].isalpha() else memory
    return (args.nodes or nodes, args.cores or cores, args.memory or memory)


def plan(binary, data_bytes, shape, args):
    nodes, cores, memory = shape
    plan_args = ["plan", "cluster", "--data", str(max(data_bytes, 1)), "--nodes", str(nodes),
                 "--cores", str(cores), "--memory", memory]
    if args.core_rate:
        plan_args += ["--core-rate", str(args.core_rate)]
    if args.from_bench:
        plan_args += ["--from-bench", args.from_bench]
    print(run_topspin(binary, plan_args, "topspin plan cluster"), flush=True)
    return json.loads(run_topspin(binary, plan_args + ["--json"], "topspin plan cluster --json"))


def first_file(spark, name):
    """The first file of an input as topspin orders them: a directory's files recursively, by
    path, names beginning with _ or . left out."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(name)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if fs.getFileStatus(path).isFile():
        return name
    files, it = [], fs.listFiles(path, True)
    while it.hasNext():
        p = it.next().getPath()
        relative = str(p.toUri().getPath())[len(str(path.toUri().getPath())):]
        if not any(part.startswith(("_", ".")) for part in relative.split("/") if part):
            files.append(str(p))
    return min(files) if files else name


def json_key_order(spark, args, columns, rows=10000):
    """Spark's JSON reader sorts columns by name; topspin keeps the first-seen key order of the
    first rows. The first rows of the first file, read on the driver, give it back."""
    seen = {}
    for line in spark.read.text(first_file(spark, args.inputs[0])).limit(rows).collect():
        try:
            pairs = json.loads(line.value, object_pairs_hook=lambda kv: kv)
        except ValueError:
            continue
        for key, _ in pairs if isinstance(pairs, list) else []:
            seen.setdefault(key, None)
    ordered = [c for c in seen if c in columns]
    return ordered + [c for c in columns if c not in seen]


def read_input(spark, args):
    reader = spark.read
    if args.format == "csv":
        frame = reader.csv(args.inputs, header=True, inferSchema=args.schema is None,
                           schema=args.schema, mode="FAILFAST")
    elif args.format == "jsonl":
        frame = reader.json(args.inputs, schema=args.schema, mode="FAILFAST")
        frame = frame.select(*[f"`{c}`" for c in json_key_order(spark, args, frame.columns)])
    else:
        frame = reader.parquet(*args.inputs)
    for name in (args.label, args.group):
        if name and name not in frame.columns:
            fail(f"{args.inputs[0]}: no column \"{name}\" (columns: {', '.join(frame.columns)})",
                 "check --label and --group")
    return frame


def topspin_types(frame, keep_float64):
    """CSV/JSON numbers typed as topspin convert types them: int64 and float32."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    columns = []
    for field in frame.schema.fields:
        column = F.col(f"`{field.name}`")
        if isinstance(field.dataType, (T.IntegerType, T.ShortType, T.ByteType)):
            column = column.cast(T.LongType())
        elif isinstance(field.dataType, T.DoubleType) and not keep_float64:
            column = column.cast(T.FloatType())
        columns.append(column.alias(field.name))
    return frame.select(*columns)


def stage_parquet(frame, args, partitions, staged):
    """Every group whole in one partition, each partition sorted by (group, input position).

    The input position is (file path, position in the file): Spark packs the splits of several
    files by size, so its row ids alone follow the files in another order."""
    from pyspark.sql import functions as F
    frame = frame.withColumn(ROW_FILE, F.input_file_name())
    frame = frame.withColumn(ROW_ID, F.monotonically_increasing_id())
    if args.group:
        frame = frame.repartition(partitions, F.col(f"`{args.group}`"))
        frame = frame.sortWithinPartitions(F.col(f"`{args.group}`"), ROW_FILE, ROW_ID)
    else:  # no groups: contiguous ranges of the input, in input order
        frame = frame.repartitionByRange(partitions, ROW_FILE, ROW_ID)
        frame = frame.sortWithinPartitions(ROW_FILE, ROW_ID)
    frame.drop(ROW_FILE, ROW_ID).write.option("compression", "zstd").parquet(str(staged))
    files = sorted(p for p in staged.rglob("*.parquet") if not p.name.startswith(("_", ".")))
    if not files:
        fail(f"{args.inputs[0]}: no rows to convert")
    return files


def convert_command(binary, args, staged, k, n, out):
    command = [binary, "convert", str(staged), "--format", "parquet", "--part", f"{k}/{n}",
               "--out", str(out)]
    if args.label:
        command += ["--label", args.label]
    if args.group:
        command += ["--group", args.group]
    if args.columns:
        command += ["--columns", args.columns]
    return command + args.convert_args


def convert_parts(spark, binary, args, staged, parts, work):
    """One Spark task per part; each runs topspin convert --part K/N on its executor."""
    task_cpus = spark.sparkContext.getConf().get("spark.task.cpus", "1")
    commands = [convert_command(binary, args, staged, k, parts, work / "parts" / str(k))
                + ["--threads", task_cpus] for k in range(parts)]

    def run(command):
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        return done.returncode, done.stderr.strip()[-2000:], time.perf_counter() - start

    results = spark.sparkContext.parallelize(commands, parts).map(run).collect()
    for k, (code, stderr, _) in enumerate(results):
        if code != 0:
            fail(f"part {k}/{parts} failed on its executor (exit {code}): {stderr}",
                 f"rerun it alone: {' '.join(commands[k])}")
    return [seconds for _, _, seconds in results]


def main(argv):
    args = parse_args(argv)
    binary = find_topspin(args.topspin)
    out = Path(args.out)
    if out.exists():
        fail(f"{out} exists", "choose a new --out (nothing was written)")
    work = Path(args.work or f"{args.out}.spark-work")
    if work.exists():
        fail(f"{work} exists", "remove it or pass another --work")

    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    from pyspark.sql import SparkSession
    local = "PYSPARK_GATEWAY_PORT" not in os.environ and (args.master or "local").startswith("local")
    if local:
        # Local mode talks to itself only: bind to loopback, so that a host
        # whose name does not resolve (a fresh container, a chroot) still
        # starts Spark instead of failing in InetAddress.getLocalHost.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("SPARK_LOCAL_HOSTNAME", "localhost")
    builder = SparkSession.builder.appName("topspin convert")
    if args.master:  # else spark-submit's --master, or local[*] under plain python
        builder = builder.master(args.master)
    spark = (builder.config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    cores = spark.sparkContext.defaultParallelism
    times = {}
    try:
        start = time.perf_counter()
        data_bytes = input_bytes(spark, args.inputs)
        sizing = plan(binary, data_bytes, cluster_shape(spark, args), args)
        partitions = args.partitions or int(sizing["partitions"])
        print(f"spark/convert.py: {data_bytes / 1e6:.1f} MB in {partitions} partitions on "
              f"{cores} cores ({spark.sparkContext.master})", flush=True)

        times["plan_s"] = time.perf_counter() - start
        t = time.perf_counter()
        frame = read_input(spark, args)  # CSV: one pass to infer the schema
        if args.format != "parquet":
            frame = topspin_types(frame, args.float64)
        times["read_schema_s"] = time.perf_counter() - t
        t = time.perf_counter()
        files = stage_parquet(frame, args, partitions, work / "staged")
        times["stage_parquet_s"] = time.perf_counter() - t
        print(f"spark/convert.py: staged {len(files)} Parquet files in "
              f"{times['stage_parquet_s']:.1f} s", flush=True)

        t = time.perf_counter()
        part_seconds = convert_parts(spark, binary, args, work / "staged", len(files), work)
        times["convert_parts_s"] = time.perf_counter() - t
        print(f"spark/convert.py: converted {len(files)} parts in {times['convert_parts_s']:.1f} s "
              f"(slowest part {max(part_seconds):.1f} s)", flush=True)

        t = time.perf_counter()
        parts = [str(work / "parts" / str(k)) for k in range(len(files))]
        print(run_topspin(binary, ["dataset", "merge", *parts, "--out", str(out)],
                          "topspin dataset merge").strip(), flush=True)
        times["merge_s"] = time.perf_counter() - t
        total = time.perf_counter() - start
    finally:
        spark.stop()
    if not args.keep_work:
        shutil.rmtree(work, ignore_errors=True)

    summary = {"input_bytes": data_bytes, "format": args.format, "master": args.master or "",
               "cores": cores, "partitions": partitions, "parts": len(files), **times,
               "seconds": total, "mb_per_s": data_bytes / 1e6 / total,
               "mb_per_s_per_core": data_bytes / 1e6 / total / cores,
               "planned_seconds": sizing["seconds"], "planned_partitions": sizing["partitions"]}
    print(f"spark/convert.py: {out} from {data_bytes / 1e6:.1f} MB in {total:.1f} s: "
          f"{summary['mb_per_s']:.1f} MB/s, {summary['mb_per_s_per_core']:.1f} MB/s per core "
          f"(the plan said {sizing['seconds']:.0f} s)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
