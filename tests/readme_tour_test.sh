#!/usr/bin/env bash
# Runs README.md's "A tour of the CLI" as written, in a fresh directory, on
# small data: every command must exit 0. Sizes shrink (queries, steps) so the
# tour takes a minute; benchmarks are left to their own tests, and the GPU
# line runs only where a GPU is visible.
# Usage: readme_tour_test.sh PATH/TO/topspin SOURCE_DIR
set -uo pipefail
bin=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
ln -s "$src/configs" configs

# The tour: the first code block after its heading, continuation lines joined.
mapfile -t commands < <(awk '
  /^## A tour of the CLI/ { in_section = 1; next }
  in_section && /^```/ { if (in_block) exit; in_block = 1; next }
  in_block {
    line = $0
    if (sub(/\\$/, "", line)) { pending = pending line; next }
    print pending line; pending = ""
  }' "$src/README.md")
[ "${#commands[@]}" -gt 20 ] || { echo "FAIL: found ${#commands[@]} tour commands"; exit 1; }

small_train=(--set train.steps=20 --set train.checkpoint_every=10 --set train.eval_every=10
             --set optim.warmup_steps=2 --set train.torch_threads=1)
failures=0
for cmd in "${commands[@]}"; do
  cmd=$(sed -E 's/[[:space:]]{2,}#.*$//; s/[[:space:]]+$//' <<<"$cmd")  # the comment
  [ -z "$cmd" ] && continue
  case "$cmd" in
    *" bench "*) echo "skip: $cmd (benchmarks have their own tests)"; continue ;;
    *train.device=cuda*)
      if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "skip: $cmd (no GPU)"; continue
      fi ;;
  esac
  cmd=$(sed -E 's/--queries 20000/--queries 400/; s/--queries 2000/--queries 100/;
                s/--vocab-size 2000/--vocab-size 300/; s/--steps 200/--steps 20/;
                s/ CONFIG / configs\/ranker-shop.yaml /; s/ CONFIG$/ configs\/ranker-shop.yaml/' <<<"$cmd")
  cmd=${cmd//.venv\/bin\/torchrun/$src/.venv/bin/torchrun}
  extra=()
  case "$cmd" in
    "topspin demo gpt"*) extra=(--steps 20) ;;
    "topspin demo"*) extra=(--queries 600 --set train.steps=60 --set train.eval_every=30
                            --set train.checkpoint_every=0) ;;
    *"--extend"*) extra=("${small_train[@]}" --set train.steps=30) ;;  # past the first run's 20
    *"topspin train "*) extra=("${small_train[@]}") ;;
    "topspin profile "*) extra=(--set optim.warmup_steps=2 --set train.torch_threads=1) ;;
  esac
  # A line with a redirection runs in a shell, `topspin` the binary under test.
  if [[ "$cmd" == *">"* ]]; then
    if out=$(bash -c "topspin() { \"$bin\" \"\$@\"; }; $cmd" 2>&1); then
      echo "ok: $cmd"
    else
      echo "FAIL: $cmd"; tail -5 <<<"$out"; failures=$((failures + 1))
    fi
    continue
  fi
  # `topspin` is the binary under test, also where torchrun runs it.
  read -r -a words <<<"$cmd"
  for i in "${!words[@]}"; do [ "${words[$i]}" = topspin ] && words[$i]=$bin; done
  words=("${words[@]//\'/}")  # the tour's quotes are for the shell, not the argument
  if out=$("${words[@]}" "${extra[@]}" 2>&1); then
    echo "ok: $cmd"
  else
    echo "FAIL: $cmd"; tail -5 <<<"$out"; failures=$((failures + 1))
  fi
done
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
