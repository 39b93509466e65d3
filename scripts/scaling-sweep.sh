#!/usr/bin/env bash
# A GPT scaling sweep on this machine: configs/scaling/gpt-sweep.yaml at
# d_model 32, 64, 96 and 128 (2 layers), each for 200, 500, 1250 and 3000
# steps of 16 x 64 tokens, on byte text held out from training; then
# `topspin plan scaling` fits L(N, D) to the 16 runs. About 10 minutes on
# 2 cores. Runs already finished are kept, so a second call only fits.
#
#   scripts/scaling-sweep.sh [OUT_DIR] [extra `topspin plan scaling` flags]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/scaling}
shift || true
bin=build/topspin
data=$out/data
mkdir -p "$data"
if [[ ! -d $data/train ]]; then
  # 4.5 MB of text without repeats: the Python standard library's
  # top-level modules (every run sees each training byte at most once);
  # the last 5% is the validation text.
  stdlib=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
  "$bin" gen text --source "$stdlib" --bytes 8000000 --out "$data/corpus.txt"
  total=$(wc -c < "$data/corpus.txt")
  head -c $((total * 95 / 100)) "$data/corpus.txt" > "$data/train.txt"
  tail -c +$((total * 95 / 100 + 1)) "$data/corpus.txt" > "$data/valid.txt"
  "$bin" convert "$data/train.txt" --format text --out "$data/train"
  "$bin" convert "$data/valid.txt" --format text --out "$data/valid"
fi
for d in 32 64 96 128; do
  for steps in 200 500 1250 3000; do
    run=$out/d$d-s$steps
    [[ -f $run/summary.json ]] && continue
    rm -rf "$run"
    "$bin" train configs/scaling/gpt-sweep.yaml --run-dir "$run" \
      --set data.train="$data/train" --set data.valid="$data/valid" \
      --set model.gpt.d_model=$d --set train.steps=$steps --set train.eval_every=$steps \
      --set optim.warmup_steps=$((steps / 10))
  done
done
"$bin" plan scaling "$out" "$@"
