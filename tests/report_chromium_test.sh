#!/usr/bin/env bash
# `topspin report` in a real browser: each page loads in headless Chromium
# without a console message, and every plot in the rendered DOM holds data.
# Pages: a hand-written run directory (a resume's duplicate steps, a torn
# last line, markup in the config) and, with LibTorch, a tiny real run.
# Usage: report_chromium_test.sh PATH/TO/topspin SOURCE_DIR
# (KEEP_TMP=1 keeps the run directories and pages for a look.)
#
# Needs chromium-headless-shell (scripts/install-deps.sh installs it).
# Without it the test is skipped (exit 77), except under CI=true: there
# install-deps.sh ran, so a missing browser is a failure.
set -uo pipefail
bin=$1
src=$2
tmp=$(mktemp -d)
trap '[ -n "${KEEP_TMP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"' EXIT
failures=0
plots=(loss validation-ndcg@10 validation-mrr throughput phases loader)

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Debian's package puts a wrapper on PATH and the binary in /usr/lib/chromium.
chromium=""
for candidate in "${CHROMIUM:-}" chromium-headless-shell /usr/lib/chromium/chromium-headless-shell; do
  if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1; then
    chromium=$(command -v "$candidate")
    break
  fi
done
if [ -z "$chromium" ]; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: chromium-headless-shell is missing (scripts/install-deps.sh installs it)"
    exit 1
  fi
  echo "SKIP: chromium-headless-shell is missing; install it with scripts/install-deps.sh" \
    "(or apt-get install chromium-headless-shell) to run this test"
  exit 77
fi
echo "browser: $chromium"

# check_page NAME HTML [PLOT=POINTS...]: loads HTML in Chromium, checks the
# console, and that every plot has points (exactly POINTS where given).
check_page() {
  local name=$1 html=$2 dom="$tmp/$1.dom.html" log="$tmp/$1.chromium.log"
  shift 2
  local -A expected=()
  local pair
  for pair in "$@"; do expected[${pair%=*}]=${pair#*=}; done
  # The page promises to load nothing and run nothing: hold it to that.
  if grep -qE '<script|<iframe| src=|href="https?:|url\(|@import' "$html"; then
    fail "$name: the page references a script or an outside resource"
    grep -oE '.{0,40}(<script|<iframe| src=|href="https?:|url\(|@import).{0,40}' "$html" | head -3
  fi
  timeout 120 "$chromium" --no-sandbox --disable-gpu --user-data-dir="$tmp/chrome-$name" \
    --enable-logging=stderr --v=0 --dump-dom "file://$html" >"$dom" 2>"$log"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    fail "$name: chromium exited $rc"; tail -5 "$log"; return
  fi
  # Console messages come out as "...:INFO:CONSOLE(line)] ..."; the page
  # has no script, so any at all (an error, an uncaught exception, a
  # refused load) is a bug.
  if grep -E 'CONSOLE|Uncaught|net::ERR_' "$log"; then
    fail "$name: the browser logged the lines above"
  else
    echo "ok: $name loads without a console message"
  fi
  for plot in "${plots[@]}"; do
    local tag series points
    tag=$(grep -oE "<svg [^>]*data-plot=\"$plot\"[^>]*>" "$dom" | head -1)
    series=$(sed -nE 's/.*data-series="([0-9]+)".*/\1/p' <<<"$tag")
    points=$(sed -nE 's/.*data-points="([0-9]+)".*/\1/p' <<<"$tag")
    if [ -n "$points" ] && [ "$series" -gt 0 ] && [ "$points" -gt 0 ] &&
       [ "${expected[$plot]:-$points}" = "$points" ]; then
      echo "ok: $name: plot $plot draws $series series, $points points"
    else
      fail "$name: plot $plot is missing or empty in the rendered DOM, or has not" \
        "${expected[$plot]:-any} points: ${tag:-no <svg>}"
    fi
  done
  grep -q 'id="profile-summary"' "$dom" && echo "ok: $name has the profile summary" ||
    fail "$name: no profile summary in the DOM"
}

"$bin" --help | grep -qE '^ *report ' && echo "ok: --help lists report" || fail "--help lacks report"

# ---- a hand-written run directory ----
run="$tmp/synthetic"
mkdir -p "$run"
train_line() {  # train_line STEP LOSS: a training record as the trainer writes it
  printf '{"step":%d,"time":%d,"docs_per_s":%d,"loss":%s,"lr":0.001,"skipped_steps":0,' "$1" \
    $((1767225600 + $1)) $((150000 + $1 * 10)) "$2"
  printf '"phase_ms/data_wait":0.1,"phase_ms/forward":4.4,"phase_ms/backward":6.2,'
  printf '"phase_ms/sync":0.0,"phase_ms/optimizer":1.7,"phase_ms/log":0.01,"phase_ms/eval":0.0,'
  printf '"phase_ms/checkpoint":0.0,"phase_ms/other":0.1,"loader_busy/read":0.02,'
  printf '"loader_busy/decode":0.1,"loader_busy/transform":0.4,"loader_busy/assemble":0.05}\n'
}
eval_line() {  # eval_line STEP NDCG
  printf '{"step":%d,"time":%d,"valid/ndcg@1":%s,"valid/ndcg@3":%s,"valid/ndcg@5":%s,' "$1" \
    $((1767225600 + $1)) "$2" "$2" "$2"
  printf '"valid/ndcg@10":%s,"valid/map@10":%s,"valid/mrr":%s}\n' "$2" "$2" "$2"
}
{
  train_line 50 2.1; train_line 100 1.6; eval_line 100 0.51; train_line 150 1.4
  train_line 100 1.55; eval_line 100 0.52; train_line 150 1.35  # resumed from step 50
  train_line 200 1.2; eval_line 200 0.58
  printf '{"step":250,"time":1767225850,"lo'  # killed mid-write
} >"$run/metrics.jsonl"
cat >"$run/profile.json" <<'EOF'
{"profile": {"steps": 200, "wall_s": 2.6, "docs": 400000, "world_size": 1,
 "phase_s": {"data_wait": 0.02, "forward": 0.88, "backward": 1.24, "optimizer": 0.34,
             "log": 0.002, "other": 0.118},
 "flops_per_doc": 210000, "peak_flops": 98000000000, "peak_source": "measured matmul",
 "peak_bytes_per_s": 26400000000, "bytes_per_step": 2100000, "loader_threads": 2,
 "stages": [{"name": "read", "busy_s": 0.1}, {"name": "transform", "busy_s": 2.0}]}}
EOF
printf 'run:\n  name: "</pre><script>alert(1)</script>"\n' >"$run/config.yaml"

out=$("$bin" report "$run" 2>"$tmp/report.err")
rc=$?
if [ "$rc" -eq 0 ] && [ "$out" = "$run/report.html" ] && [ -s "$run/report.html" ]; then
  echo "ok: report wrote $out"
else
  fail "report exited $rc and printed '$out'"; cat "$tmp/report.err"
fi
grep -q "metrics.jsonl:10: skipped a line cut short" "$tmp/report.err" &&
  echo "ok: the torn last line is skipped with a warning" || fail "no warning for the torn line"
grep -q '&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;' "$run/report.html" &&
  echo "ok: the config is escaped" || fail "the config is not escaped"
# Steps 50-200 once each (the resume's repeats replaced), two evaluations
# of six metrics, six phases that are not 0, four loader stages.
check_page synthetic "$run/report.html" loss=4 validation-ndcg@10=2 validation-mrr=2 throughput=4 phases=24 loader=16

# --out, and the errors that say what to do.
out=$("$bin" report "$run" --out "$tmp/elsewhere.html" 2>/dev/null) && [ "$out" = "$tmp/elsewhere.html" ] &&
  [ -s "$tmp/elsewhere.html" ] && echo "ok: --out" || fail "--out: '$out'"
mkdir -p "$tmp/empty"
msg=$("$bin" report "$tmp/empty" 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && grep -q "no metrics.jsonl in $tmp/empty: is this a run directory?" <<<"$msg" &&
   grep -q "topspin train CONFIG" <<<"$msg"; then
  echo "ok: a directory without metrics.jsonl is a user error saying what to do"
else
  fail "empty directory: exit $rc: $msg"
fi

# ---- a tiny real training run ----
if "$bin" version | grep -q "libtorch  *[0-9]"; then
  "$bin" gen shop --queries 300 --seed 5 --out "$tmp/raw" --format csv >"$tmp/data.log" 2>&1 &&
    "$bin" convert "$(ls "$tmp"/raw/*.csv | head -1)" --format csv --label label --group qid \
      --out "$tmp/ds" --threads 2 >>"$tmp/data.log" 2>&1 || { fail "gen/convert"; tail -5 "$tmp/data.log"; }
  if "$bin" train "$src/configs/ranker-shop.yaml" --set data.train="$tmp/ds" \
       --set data.valid="$tmp/ds" --set train.steps=40 --set train.log_every=5 \
       --set train.eval_every=20 --set train.checkpoint_every=0 --set model.top=32 \
       --set pipeline.batch_size=16 --set train.torch_threads=1 --set optim.warmup_steps=5 \
       --run-dir "$tmp/real" >"$tmp/train.log" 2>&1; then
    out=$("$bin" report "$tmp/real" 2>"$tmp/report.err") && [ -s "$out" ] &&
      echo "ok: report of a real run: $out" || { fail "report of a real run"; cat "$tmp/report.err"; }
    check_page real "$tmp/real/report.html"
  else
    fail "training the tiny run"; tail -5 "$tmp/train.log"
  fi
else
  echo "skip: the real run needs a topspin built with LibTorch"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all report checks passed"
