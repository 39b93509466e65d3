#!/usr/bin/env bash
# scripts/spark/convert.py in Spark local mode (local[2]) on generated shop
# data (issue 21): raw CSV and JSON Lines -> Spark (repartition by qid,
# Parquet) -> `topspin convert --part K/N` on the executors -> merge.
#   - the result equals, row by row, a single-process convert of the Parquet
#     that Spark staged (rows, row groups, statistics);
#   - it holds the raw input's groups, each with the same rows in the same
#     order, as a single-process convert of the raw file (dataset diff
#     --by-group), while row by row it differs (Spark did move the groups).
# About 30 s on 2 cores alone (45 s beside other tests), most of it two JVM start-ups.
# Usage: spark_convert_test.sh PATH/TO/topspin SOURCE_DIR [PYTHON]
set -euo pipefail
bin=$1
src=$2
py=${3:-$src/.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; exit 1; }

"$bin" gen shop --queries 400 --out "$tmp/raw" >/dev/null
# The same rows as JSON Lines: empty fields as null, true/false as booleans,
# numbers as numbers, keys in the CSV's column order.
"$py" - "$tmp/raw/shop.csv" "$tmp/raw/shop.jsonl" <<'PY'
import csv, json, sys
def value(text):
    if text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
with open(sys.argv[1], newline="") as f, open(sys.argv[2], "w") as out:
    for row in csv.DictReader(f):
        out.write(json.dumps({k: value(v) for k, v in row.items()}) + "\n")
PY

for format in csv jsonl; do
  raw=$tmp/raw/shop.$format
  out=$tmp/spark-$format
  "$py" "$src/scripts/spark/convert.py" "$raw" --format $format --label label --group qid \
    --master 'local[2]' --partitions 3 --topspin "$bin" --keep-work --out "$out" \
    --json "$tmp/$format.json" -- --row-group-rows 1000 >"$tmp/$format.log" 2>&1 ||
    { tail -30 "$tmp/$format.log"; fail "spark/convert.py --format $format"; }
  grep -q '"parts": 3' "$tmp/$format.json" || fail "$format: not 3 parts: $(cat "$tmp/$format.json")"
  grep -q "partitions (tasks)" "$tmp/$format.log" || fail "$format: the cluster plan was not printed"

  # 1. Row by row, a single convert of what Spark staged.
  "$bin" convert "$out.spark-work/staged" --format parquet --label label --group qid \
    --row-group-rows 1000 --out "$tmp/single-staged-$format" >/dev/null
  "$bin" dataset diff "$tmp/single-staged-$format" "$out" || fail "$format: differs from the staged convert"

  # 2. Group by group, a single convert of the raw file.
  "$bin" convert "$raw" --format $format --label label --group qid --out "$tmp/single-$format" >/dev/null
  "$bin" dataset diff --by-group "$tmp/single-$format" "$out" || fail "$format: groups differ from the raw convert"
  if "$bin" dataset diff "$tmp/single-$format" "$out" >/dev/null; then
    fail "$format: row by row equal to the raw convert: Spark did not repartition"
  fi
  echo "ok: $format"
done

# A damaged group is found: one value changed in one group of the raw CSV.
sed '3s/^\([0-9]*\),\([^,]*\),[^,]*,/\1,\2,99.5,/' "$tmp/raw/shop.csv" >"$tmp/changed.csv"
"$bin" convert "$tmp/changed.csv" --format csv --label label --group qid --out "$tmp/changed" >/dev/null
if "$bin" dataset diff --by-group "$tmp/changed" "$tmp/spark-csv" >"$tmp/changed.log"; then
  fail "a changed value went unnoticed"
fi
grep -q "group 0 (rows 0 and" "$tmp/changed.log" || fail "the changed group is not named: $(cat "$tmp/changed.log")"
echo "ok: a changed value is found"

# Nothing is written over: an existing --out is refused before Spark starts.
if "$py" "$src/scripts/spark/convert.py" "$tmp/raw/shop.csv" --group qid --topspin "$bin" \
     --out "$tmp/spark-csv" >"$tmp/exists.log" 2>&1; then
  fail "an existing --out was accepted"
fi
grep -q "spark-csv exists; hint: choose a new --out" "$tmp/exists.log" || fail "$(cat "$tmp/exists.log")"
echo "ok: an existing --out is refused"
