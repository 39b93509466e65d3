#!/usr/bin/env bash
# Runs every libFuzzer binary of a TOPSPIN_FUZZ=ON build for a bounded time.
#   scripts/run-fuzzers.sh BUILD_DIR SECONDS
# Seeds and kept crashes live in tests/fuzz/<target>/; the working corpus
# grows in BUILD_DIR/corpus/<target>/. Exits non-zero if any target crashed
# (the crashing input is saved to tests/fuzz/<target>/crash-*).
set -uo pipefail
build=${1:?usage: run-fuzzers.sh BUILD_DIR SECONDS}
seconds=${2:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
shopt -s nullglob
for src in "$root"/src/*/*_fuzz.cc; do
  name=$(basename "$src" .cc)
  bin="$build/$name"
  [ -x "$bin" ] || { echo "run-fuzzers: $bin missing (build with TOPSPIN_FUZZ=ON)"; status=1; continue; }
  kept="$root/tests/fuzz/$name"
  corpus="$build/corpus/$name"
  mkdir -p "$kept" "$corpus"
  echo "== $name: ${seconds}s"
  if ! ASAN_OPTIONS=detect_leaks=1 "$bin" -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix="$kept/" "$corpus" "$kept" 2>"$build/$name.log"; then
    echo "run-fuzzers: $name crashed; input kept in tests/fuzz/$name/ (see $build/$name.log)"
    tail -30 "$build/$name.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$build/$name.log" | tail -2
  fi
done
exit $status
