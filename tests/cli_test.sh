#!/usr/bin/env bash
# End-to-end checks of the `topspin` binary: exit codes, messages, docs.
# Usage: cli_test.sh PATH/TO/topspin SOURCE_DIR
set -uo pipefail
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect CODE PATTERN -- CMD...: CMD exits with CODE and its output matches PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$code" ]; then
    echo "FAIL: '$*' exited $rc, expected $code"; echo "$out" | head -20; failures=$((failures + 1))
  elif ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: '$*' output lacks /$pattern/"; echo "$out" | head -20; failures=$((failures + 1))
  else
    echo "ok: $*"
  fi
}

# Help lists every subcommand.
for sub in version config demo gen convert inspect tokenizer pipeline train tune eval score generate profile report plan bench completion; do
  expect 0 "^ *$sub " -- "$bin" --help
done
expect 2 "nosuchcmd" -- "$bin" nosuchcmd
expect 2 "bogus" -- "$bin" version --bogus
expect 2 "log-level" -- "$bin" --log-level loud version
expect 0 "libtorch" -- "$bin" version
# Compute commands re-execute once with topspin's OpenMP spin count, unless
# the user chose one (include/topspin/core/omp_wait.h).
if "$bin" version | grep -q "libtorch  *[0-9]"; then
  expect 0 "openmp +GOMP_SPINCOUNT=10000 \(topspin's default" -- \
    env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY -u TOPSPIN_OMP_DEFAULT "$bin" version
  expect 0 "openmp +GOMP_SPINCOUNT=77 \(from the environment\)" -- \
    env -u OMP_WAIT_POLICY -u TOPSPIN_OMP_DEFAULT GOMP_SPINCOUNT=77 "$bin" version
  expect 0 "openmp +OMP_WAIT_POLICY=passive \(from the environment\)" -- \
    env -u GOMP_SPINCOUNT -u TOPSPIN_OMP_DEFAULT OMP_WAIT_POLICY=passive "$bin" version
fi

expect 0 "^topspin [0-9]+\.[0-9]+" -- "$bin" --version
# Shell completion: generated from the command tree; bash can load it and
# completes commands, subcommands and flags.
"$bin" completion bash >"$tmp/completion.bash"
complete_words() {  # complete_words WORD...: what <TAB> after them offers
  bash -c 'source "$1"; shift; COMP_WORDS=(topspin "$@"); COMP_CWORD=$(($# )); _topspin; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$tmp/completion.bash" "$@"
}
if complete_words tr | grep -qx train && complete_words bench re | grep -qx read &&
   complete_words train x.yaml --ext | grep -qx -- --extend; then
  echo "ok: bash completion of commands, subcommands and flags"
else
  echo "FAIL: bash completion: $(complete_words tr | tr '\n' ' ')"; failures=$((failures + 1))
fi
expect 2 "no completion script for \"fish\"" -- "$bin" completion fish
# config check refuses what training would: layer widths are checked on load.
expect 2 '"model.top": "abc" in "64,abc" is not an integer' -- "$bin" config check --set model.top=64,abc
# A typo in a config: exit 2, the message names the key, line and intended key.
printf 'run:\n  seed: 3\npipeline:\n  threads: 2\n  prefetc: 8\n' >"$tmp/typo.yaml"
expect 2 "typo.yaml:5:3: \"pipeline.prefetc\": unknown key; hint: did you mean \"pipeline.prefetch\"\?" \
  -- "$bin" config check "$tmp/typo.yaml"
printf 'pipeline:\n  threads: 0\n' >"$tmp/range.yaml"
expect 2 "range.yaml:2:3: .*between 1 and 256" -- "$bin" config check "$tmp/range.yaml"
expect 2 "no.yaml.*not found" -- "$bin" config check "$tmp/no.yaml"
expect 2 "did you mean \"optim.lr\"" -- "$bin" config show --set optim.rl=1

# show -> file -> hash round trip, and overrides.
printf 'pipeline:\n  threads: 2\n' >"$tmp/ok.yaml"
"$bin" config show "$tmp/ok.yaml" --set optim.lr=0.5 >"$tmp/shown.yaml" || failures=$((failures + 1))
h1=$("$bin" config hash "$tmp/ok.yaml" --set optim.lr=0.5)
h2=$("$bin" config hash "$tmp/shown.yaml")
if [ -n "$h1" ] && [ "$h1" = "$h2" ]; then echo "ok: config show round-trips ($h1)"; else
  echo "FAIL: hash of shown config $h2 != $h1"; failures=$((failures + 1)); fi
expect 0 "threads: 2  # .*ok.yaml:2" -- "$bin" config show "$tmp/ok.yaml" --origins

# docs/CONFIG.md carries the schema exactly as the binary prints it.
marker='<!-- generated: topspin config schema --markdown -->'
if diff <(sed -n "/^$marker\$/,\$p" "$src/docs/CONFIG.md" | tail -n +2) \
        <("$bin" config schema --markdown) >"$tmp/schema.diff"; then
  echo "ok: docs/CONFIG.md matches the schema"
else
  echo "FAIL: docs/CONFIG.md is stale; regenerate the part after the marker with"
  echo "      topspin config schema --markdown"; head -20 "$tmp/schema.diff"; failures=$((failures + 1))
fi

# The demo runs end to end and leaves a run directory with its resolved config.
expect 0 "features      48 dense, 6 sparse" -- "$bin" demo --set run.dir="$tmp/runs" --queries 600 \
  --set train.steps=60 --set train.eval_every=0 --set train.checkpoint_every=0
if [ -f "$tmp/runs/demo-001/config.yaml" ] && [ -f "$tmp/runs/demo-001/demo.json" ]; then
  echo "ok: demo wrote runs/demo-001"
else
  echo "FAIL: demo did not write runs/demo-001"; ls -R "$tmp/runs" 2>&1 | head; failures=$((failures + 1))
fi

# The demo's pipeline ran its features over the demo data.
grep -q '"docs_per_s"' "$tmp/runs/demo-001/demo.json" && echo "ok: demo pipeline recorded" ||
  { echo "FAIL: demo.json lacks the pipeline"; failures=$((failures + 1)); }

# Data: gen shop -> convert -> inspect -> verify; damage is exit 1 with a precise message.
expect 0 "" -- "$bin" gen shop --queries 300 --seed 5 --out "$tmp/raw" --format csv
csv=$(ls "$tmp"/raw/*.csv | head -1)
expect 0 "" -- "$bin" convert "$csv" --format csv --label label --group qid --out "$tmp/ds" --threads 2
expect 0 "rows" -- "$bin" inspect "$tmp/ds"
expect 0 "zstd-split" -- "$bin" inspect "$tmp/ds"  # numbers as byte planes where smaller
expect 0 "" -- "$bin" inspect "$tmp/ds" --verify
# --no-byte-planes: what topspin builds without codec zstd-split read.
expect 0 "" -- "$bin" convert "$csv" --format csv --label label --group qid --out "$tmp/ds-plain" --no-byte-planes
expect 0 '"zstd-split": 0' -- "$bin" inspect "$tmp/ds-plain" --json
expect 2 "exists" -- "$bin" convert "$csv" --format csv --out "$tmp/ds"
expect 2 "csvv not in" -- "$bin" convert "$csv" --format csvv --out "$tmp/ds2"
# dataset diff: 0 when the same data, 1 with the differences listed, 2 on a user error.
expect 0 "" -- "$bin" convert "$csv" --format csv --label label --group qid --out "$tmp/ds-again" --threads 1
expect 0 "hold the same data \([0-9]+ rows, row by row\)" -- "$bin" dataset diff "$tmp/ds" "$tmp/ds-again"
head -n -5 "$csv" > "$tmp/fewer.csv"
expect 0 "" -- "$bin" convert "$tmp/fewer.csv" --label label --group qid --out "$tmp/ds-fewer"
expect 1 "[0-9]+ rows vs [0-9]+" -- "$bin" dataset diff "$tmp/ds" "$tmp/ds-fewer"
expect 2 "Directory does not exist" -- "$bin" dataset diff "$tmp/ds" "$tmp/nope"
# Infinite values are valid floats: counted, left out of the statistics.
printf 'qid,label,f1\n1,1,-inf\n1,0,inf\n1,0,1\n' > "$tmp/inf.csv"
expect 0 "" -- "$bin" convert "$tmp/inf.csv" --label label --group qid --out "$tmp/inf"
expect 0 '"infinite": 2' -- "$bin" inspect "$tmp/inf" --json
printf '1 qid:1 1:-inf 2:3\n0 qid:1 1:inf 2:1\n' > "$tmp/inf.letor"
expect 0 "" -- "$bin" convert "$tmp/inf.letor" --format letor --out "$tmp/inf-letor"
# LETOR's label and qid are the dataset's label and group.
expect 0 '"group_column": "qid"' -- "$bin" inspect "$tmp/inf-letor" --json
# The pipeline command runs the demo features over the converted data, and
# explains a misspelt column and a missing dataset.
expect 0 "docs/s" -- "$bin" pipeline demo --set data.train="$tmp/ds" --epochs 2
expect 0 "open in ui.perfetto.dev" -- "$bin" pipeline demo --set data.train="$tmp/ds" \
  --trace "$tmp/pipeline-trace.json"
grep -q '"decode"' "$tmp/pipeline-trace.json" && grep -q '"wait for batch"' "$tmp/pipeline-trace.json" &&
  echo "ok: pipeline trace has the stages and the consumer's waits" ||
  { echo "FAIL: pipeline trace lacks stages or waits"; failures=$((failures + 1)); }
expect 2 'did you mean \"price\"' -- "$bin" pipeline demo --set data.train="$tmp/ds" \
  --set 'pipeline.dense=["pricee: log1p"]'
expect 2 "data.train is not set" -- "$bin" pipeline demo
# tokenizer encode / decode, for every spec. A GPT-2 BPE directory: the 256
# byte tokens, "Ġt", "Ġth" and <|endoftext|> (tests/bpe_vs_hf.py checks
# trained ones against Hugging Face).
mkdir -p "$tmp/gpt2-tok"
python3 - "$tmp/gpt2-tok" <<'PY'
import json, sys
printable = [*range(33, 127), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
chars = {b: chr(b) for b in printable}
chars.update({b: chr(256 + n) for n, b in enumerate(b for b in range(256) if b not in chars)})
vocab = {chars[b]: b for b in range(256)}
vocab.update({"\u0120t": 256, "\u0120th": 257, "<|endoftext|>": 258})
open(sys.argv[1] + "/vocab.json", "w").write(json.dumps(vocab))
open(sys.argv[1] + "/merges.txt", "w").write("#version: 0.2\n\u0120 t\n\u0120t h\n")
PY
expect 0 "^72 105 33$" -- bash -c "printf 'Hi!' | '$bin' tokenizer encode"
expect 0 "^\[97,257,101,46\]$" -- bash -c "printf 'a the.' | '$bin' tokenizer encode --json --tokenizer 'gpt2:$tmp/gpt2-tok' -"
expect 0 "^a the\.$" -- bash -c "echo '[97, 257, 258, 101, 46]' | '$bin' tokenizer decode --tokenizer 'gpt2:$tmp/gpt2-tok'"
printf 'caf\xe9\n' >"$tmp/latin1.txt"
expect 2 "latin1.txt: byte 3: cannot encode text that is not valid UTF-8" -- \
  "$bin" tokenizer encode --tokenizer "gpt2:$tmp/gpt2-tok" "$tmp/latin1.txt"
expect 2 "nope/vocab.json: GPT-2 tokenizer file not found|nope: GPT-2 tokenizer directory not found" -- \
  "$bin" tokenizer encode --tokenizer "gpt2:$tmp/nope" "$tmp/latin1.txt"
expect 2 "token 259 \(position 1\)" -- bash -c "echo '1 259' | '$bin' tokenizer decode --tokenizer 'gpt2:$tmp/gpt2-tok'"
expect 2 '"x1" is not a token id' -- bash -c "echo '1 x1' | '$bin' tokenizer decode"
expect 2 'did you mean "gpt2:DIR"' -- "$bin" tokenizer encode --tokenizer "gpt:$tmp/gpt2-tok" "$tmp/latin1.txt"
# Training: kill -9 at a random moment (maybe mid-checkpoint), resume, and
# the final parameters are bitwise those of a run never interrupted.
if "$bin" version | grep -q "libtorch  *[0-9]"; then
  train_args=(train "$src/configs/ranker-shop.yaml" --set data.train="$tmp/ds" --set data.valid=
              --set train.steps=40 --set train.checkpoint_every=3 --set train.log_every=10
              --set model.top=32 --set pipeline.batch_size=16 --set train.torch_threads=1
              --set optim.warmup_steps=5)
  started=$(date +%s%N)
  expect 0 "trained       40 steps" -- "$bin" "${train_args[@]}" --run-dir "$tmp/straight"
  straight_s=$(awk -v a="$started" -v b="$(date +%s%N)" 'BEGIN{printf "%.3f", (b - a) / 1e9}')
  # config check is the start-up's dry run: data, features, schemas, rules, memory.
  check_args=(config check "$src/configs/ranker-shop.yaml" --set data.train="$tmp/ds" --set data.valid=)
  expect 0 "model: .* dense parameters.*fits in" -- "$bin" "${check_args[@]}"
  expect 2 "warmup_steps \\(100\\) must be" -- "$bin" "${check_args[@]}" --set optim.warmup_steps=100 \
    --set train.steps=50
  expect 2 "more than the .* this host has available" -- "$bin" "${check_args[@]}" \
    --set model.top=100000,100000
  expect 0 "" -- "$bin" gen shop --queries 60 --out "$tmp/shards" --format shards
  expect 2 'column "sales_7d" is int32 here and int64 in the reference' -- "$bin" "${check_args[@]}" \
    --set data.valid="$tmp/shards"
  expect 2 'no column "pricee"' -- "$bin" "${check_args[@]}" --set 'pipeline.dense=["pricee: log1p"]'
  # The kill lands at a random moment after the first checkpoint, up to 30%
  # of the uninterrupted run's time later (maybe mid-way through another).
  # A timer from the start raced the run's end when the machine's load
  # changed; a kill that still lands after the last step is tried again.
  for attempt in 1 2 3; do
    rm -rf "$tmp/killed"
    "$bin" "${train_args[@]}" --run-dir "$tmp/killed" >/dev/null 2>&1 &
    victim=$!
    for _ in $(seq 3000); do
      compgen -G "$tmp/killed/checkpoints/step-*" >/dev/null && break
      kill -0 "$victim" 2>/dev/null || break
      sleep 0.01
    done
    sleep "$(awk -v s="$straight_s" 'BEGIN{srand(); printf "%.2f", s * rand() * 0.3}')"
    kill -9 "$victim" 2>/dev/null
    wait "$victim" 2>/dev/null
    [ -d "$tmp/killed/checkpoints/step-40" ] || break
    echo "note: kill -9 attempt $attempt landed after the last step; again"
  done
  expect 0 "trained       40 steps" -- "$bin" "${train_args[@]}" --run-dir "$tmp/killed" --resume auto
  sha() { grep -o '"sha256": *"[0-9a-f]*"' "$1/checkpoints/step-40/manifest.json" | head -1; }
  if [ -n "$(sha "$tmp/straight")" ] && [ "$(sha "$tmp/straight")" = "$(sha "$tmp/killed")" ]; then
    echo "ok: kill -9 + --resume auto is bitwise identical"
  else
    echo "FAIL: resumed run differs: $(sha "$tmp/straight") vs $(sha "$tmp/killed")"
    failures=$((failures + 1))
  fi
  expect 2 "needs --run-dir" -- "$bin" "${train_args[@]}" --resume auto
  # A finished run resumed has nothing to do, and says so.
  expect 0 "trained       nothing: the run had already finished its 40 steps" -- \
    "$bin" "${train_args[@]}" --run-dir "$tmp/straight" --resume auto

  # While a run trains: its metrics reach the disk every log window, a
  # second training of the same directory is refused by pid, SIGTERM
  # checkpoints and exits 143, and kill -9 keeps every line logged.
  long_args=("${train_args[@]}" --set train.steps=100000 --set train.log_every=1
             --set train.checkpoint_every=50 --run-dir "$tmp/live")
  lines() { wc -l < "$tmp/live/metrics.jsonl" 2>/dev/null || echo 0; }
  await_lines() {  # await_lines N: up to 60 s for N lines
    for _ in $(seq 600); do [ "$(lines)" -ge "$1" ] && return 0; sleep 0.1; done; return 1
  }
  "$bin" "${long_args[@]}" >"$tmp/live.log" 2>&1 & live=$!
  if await_lines 3 && kill -0 "$live" 2>/dev/null; then
    echo "ok: metrics reach metrics.jsonl while the run trains"
  else
    echo "FAIL: no metrics on disk during the run"; failures=$((failures + 1))
  fi
  expect 2 "is in use by another training \\(pid $live\\)" -- "$bin" "${long_args[@]}" --resume auto
  kill -TERM "$live"; wait "$live"; rc=$?
  if [ "$rc" -eq 143 ] && grep -q "stopped       at step" "$tmp/live.log" &&
     grep -q "continue      with --resume auto" "$tmp/live.log"; then
    echo "ok: SIGTERM checkpoints and exits 143"
  else
    echo "FAIL: SIGTERM: exit $rc"; tail -3 "$tmp/live.log"; failures=$((failures + 1))
  fi
  "$bin" "${long_args[@]}" --resume auto >"$tmp/live2.log" 2>&1 & live=$!
  before=$(lines)
  await_lines $((before + 3))
  kill -9 "$live"; wait "$live" 2>/dev/null
  logged=$(lines)
  if [ "$logged" -ge $((before + 3)) ] && [ "$(find "$tmp/live/tb" -type f -size +200c | wc -l)" -ge 1 ]; then
    echo "ok: kill -9 keeps the $logged logged lines and the TensorBoard events"
  else
    echo "FAIL: after kill -9: $logged lines (had $before)"; failures=$((failures + 1))
  fi
  expect 0 "live.html" -- "$bin" report "$tmp/live" --out "$tmp/live.html"
  # Every checkpoint damaged: --resume auto refuses instead of starting over.
  cp -r "$tmp/straight" "$tmp/damaged"
  for f in "$tmp"/damaged/checkpoints/step-*/model.safetensors; do
    printf 'XXXX' | dd of="$f" bs=1 seek=64 conv=notrunc status=none
  done
  expect 2 "checkpoints in .* are damaged" -- "$bin" "${train_args[@]}" --run-dir "$tmp/damaged" --resume auto
  # A start that fails before training leaves no numbered run directory.
  expect 2 "nonexistent" -- "$bin" "${train_args[@]}" --set run.dir="$tmp/clutter" \
    --set data.train="$tmp/nonexistent"
  if [ -z "$(ls -A "$tmp/clutter" 2>/dev/null)" ]; then
    echo "ok: a failed start leaves no run directory"
  else
    echo "FAIL: a failed start left $(ls "$tmp/clutter")"; failures=$((failures + 1))
  fi
  # A run directory that cannot be created is the user's error, with its path.
  expect 2 "/proc/topspin-run" -- "$bin" "${train_args[@]}" --run-dir /proc/topspin-run/x
  # A read-only filesystem (root can mount one; others skip): exit 2, the path.
  mkdir -p "$tmp/ro"
  if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o ro,size=1m tmpfs "$tmp/ro" 2>/dev/null; then
    expect 2 "$tmp/ro/run.*Read-only file system" -- "$bin" "${train_args[@]}" --run-dir "$tmp/ro/run"
    umount "$tmp/ro"
  else
    echo "skip: read-only run directory (needs root to mount a read-only tmpfs)"
  fi
  # eval: the run's config and newest checkpoint, scored on a dataset.
  expect 0 "ndcg@10 +0\.[0-9]{4}" -- "$bin" eval "$tmp/straight" --data "$tmp/ds" --json "$tmp/e.json"
  grep -q '"ndcg@10"' "$tmp/e.json" && echo "ok: eval json" || { echo "FAIL: eval json"; failures=$((failures + 1)); }
  expect 0 "step 39" -- "$bin" eval "$tmp/straight/checkpoints/step-39" --data "$tmp/ds"
  expect 2 "config.yaml" -- "$bin" eval "$tmp"
  mkdir -p "$tmp/fresh" && cp "$tmp/straight/config.yaml" "$tmp/fresh/"
  expect 2 "has no checkpoint yet" -- "$bin" eval "$tmp/fresh" --data "$tmp/ds"
  # score: one CSV line per document, in dataset order, atomically written.
  expect 0 "scored +[0-9]+ documents in [0-9]+ lists .* docs/s" -- \
    "$bin" score "$tmp/straight" --data "$tmp/ds" --out "$tmp/scores.csv"
  rows=$(($(wc -l < "$csv") - 1))  # the CSV the dataset was converted from
  if [ "$(head -1 "$tmp/scores.csv")" = "qid,row,label,score" ] &&
     [ "$(($(wc -l < "$tmp/scores.csv") - 1))" = "$rows" ] &&
     [ "$(sed -n 2p "$tmp/scores.csv" | cut -d, -f2)" = 0 ]; then
    echo "ok: score writes $rows documents with group, row, label and score"
  else
    echo "FAIL: score output: $(head -2 "$tmp/scores.csv" | tr '\n' '|'), $rows rows expected"
    failures=$((failures + 1))
  fi
  expect 2 "name the output FILE.csv" -- "$bin" score "$tmp/straight" --data "$tmp/ds" --out "$tmp/s.txt"
  # Extending a finished run, and a new run from a checkpoint's weights.
  cp -r "$tmp/straight" "$tmp/extended"
  expect 2 "add --extend" -- "$bin" "${train_args[@]}" --run-dir "$tmp/extended" --resume auto \
    --set train.steps=50
  expect 2 "needs --resume" -- "$bin" "${train_args[@]}" --run-dir "$tmp/extended" --extend
  expect 0 "trained       50 steps \(resumed at 40\)" -- "$bin" "${train_args[@]}" \
    --run-dir "$tmp/extended" --resume auto --extend --set train.steps=50
  grep -q "steps: 50" "$tmp/extended/config.yaml" && echo "ok: --extend rewrites config.yaml" ||
    { echo "FAIL: --extend left config.yaml"; failures=$((failures + 1)); }
  expect 0 "trained       20 steps" -- "$bin" "${train_args[@]}" --run-dir "$tmp/tuned" \
    --init-from "$tmp/straight" --set train.steps=20 --set optim.lr=0.0005
  grep -q '"init_from"' "$tmp"/tuned/checkpoints/step-20/manifest.json 2>/dev/null ||
    grep -rq 'init_from' "$tmp/tuned/checkpoints/step-20" &&
    echo "ok: --init-from recorded in the checkpoint" ||
    { echo "FAIL: --init-from not recorded"; failures=$((failures + 1)); }
  expect 2 "drop --resume" -- "$bin" "${train_args[@]}" --run-dir "$tmp/tuned" --resume auto \
    --init-from "$tmp/straight"
  # The best checkpoint and early stopping: eval and score use the best.
  expect 0 "stopped early at step 15: valid ndcg@10 has not improved by more than 1 in 2" -- \
    "$bin" "${train_args[@]}" --run-dir "$tmp/early" --set data.valid="$tmp/ds" \
    --set train.eval_every=5 --set train.early_stop.patience=2 --set train.early_stop.min_delta=1
  expect 0 "checkpoints/step-5 \(step 5\)" -- "$bin" eval "$tmp/early" --data "$tmp/ds"
  expect 0 "checkpoints/step-15 \(step 15\)" -- "$bin" eval "$tmp/early" --data "$tmp/ds" \
    --checkpoint latest

  # profile: a config measured (phase table, bound, trace), and a run's profile.json.
  expect 0 "bound +(compute|host|memory|collectives): " -- "$bin" profile "$src/configs/ranker-shop.yaml" \
    --set data.train="$tmp/ds" --set data.valid= --set optim.warmup_steps=5 --set model.top=32 \
    --steps 20 --run-dir "$tmp/prof" --trace "$tmp/trace.json" --json "$tmp/prof.json"
  grep -q '"ph":"X"' "$tmp/trace.json" && grep -q '"bound"' "$tmp/prof.json" &&
    echo "ok: profile trace and json" || { echo "FAIL: profile trace/json"; failures=$((failures + 1)); }
  expect 0 "steady state  after a 4-step warm-up: (compute|host|memory|collectives) in [0-9]+ of [0-9]+ log windows" \
    -- "$bin" profile "$tmp/prof"
  expect 0 "MFU unknown" -- "$bin" profile "$tmp/straight"
  expect 0 "MFU [0-9.]+% of 0.100 TFLOP/s" -- "$bin" profile "$tmp/straight" --peak 0.1
  expect 2 "has no profile.json" -- "$bin" profile "$tmp"

  # The GPT through the same trainer (model.kind gpt): byte tokens of a
  # generated corpus, two ranks with ZeRO-3 from the config.
  expect 0 "" -- "$bin" gen text --bytes 40000 --out "$tmp/corpus.txt"
  expect 0 "" -- "$bin" convert "$tmp/corpus.txt" --format text --out "$tmp/text"
  gpt_args=(train "$src/configs/gpt.yaml" --set data.train="$tmp/text" --set data.valid="$tmp/text"
            --set model.gpt.layers=1 --set model.gpt.d_model=32 --set model.gpt.heads=2
            --set model.gpt.context=16 --set pipeline.batch_size=4 --set train.steps=6
            --set train.eval_every=3 --set train.eval_batches=2 --set train.torch_threads=1
            --set pipeline.threads=1 --set optim.warmup_steps=1)
  expect 0 "trained       6 steps, [0-9]+ tokens/s" -- "$bin" "${gpt_args[@]}" --nproc 2 \
    --set dist.zero=3 --run-dir "$tmp/gpt"
  expect 0 '"unit": "tokens"' -- cat "$tmp/gpt/summary.json"
  expect 0 "valid/loss" -- cat "$tmp/gpt/best.json"
  expect 2 "model.gpt.vocab" -- "$bin" config check "$src/configs/gpt.yaml" \
    --set data.train="$tmp/text" --set model.gpt.vocab=100
  # The GPT-2 configs, tiny to 1.5B, are valid.
  for size in tiny 124m 350m 774m 1.5b; do
    expect 0 "" -- "$bin" config check "$src/configs/gpt2-$size.yaml" --set data.train="$tmp/text"
  done
  # A model of the other path through the switches: composed AdamW.
  expect 0 "trained       6 steps" -- "$bin" "${gpt_args[@]}" --set optim.fused=false \
    --run-dir "$tmp/gpt-unfused"
  # The AutoTuner on the GPT: a tuned config with a reason per tuned key and
  # a trial log; the second run, and train --tune, read its cache; the
  # ranks of a job launched with --tune read what their launcher tuned.
  tune_env=(env TOPSPIN_TUNE_CACHE="$tmp/tune-cache")
  tune_args=(tune "$src/configs/gpt.yaml" "${gpt_args[@]:2}" --budget 3 --out "$tmp/tuned.yaml")
  expect 0 "cache .*\(written\)" -- "${tune_env[@]}" "$bin" "${tune_args[@]}"
  expect 0 "  threads: [0-9]+  # tuned [0-9]+: " -- cat "$tmp/tuned.yaml"
  expect 0 "  batch_size: 4  # tuned 4 per rank" -- cat "$tmp/tuned.yaml"
  expect 0 '"search":"throughput"' -- cat "$tmp/tuned.yaml.trials.jsonl"
  expect 0 "cache .*\(hit\)" -- "${tune_env[@]}" "$bin" "${tune_args[@]}"
  expect 0 "trained       6 steps" -- "$bin" train "$tmp/tuned.yaml" --run-dir "$tmp/gpt-tuned"
  expect 0 "tune .*from the cache" -- "${tune_env[@]}" "$bin" "${gpt_args[@]}" --tune \
    --run-dir "$tmp/gpt-tune"
  expect 0 "trained       6 steps" -- "${tune_env[@]}" "$bin" "${gpt_args[@]}" --tune \
    --tune-budget 3 --nproc 2 --run-dir "$tmp/gpt-tune2"
  expect 2 "memory-limit" -- "$bin" "${tune_args[@]}" --memory-limit lots
  # Generation and evaluation of the ZeRO-3 run's (gathered) best checkpoint:
  # the same seed, the same text; stdout is the prompt and the text alone.
  gen_args=(generate "$tmp/gpt" --prompt "The " --max-new-tokens 24 --seed 7 --temperature 1)
  expect 0 "generated     [0-9]+ tokens after a prompt of 4" -- "$bin" "${gen_args[@]}"
  if [ "$("$bin" "${gen_args[@]}" 2>/dev/null)" = "$("$bin" "${gen_args[@]}" 2>/dev/null)" ]; then
    echo "ok: generate repeats per seed"
  else
    echo "FAIL: generate differs between runs of one seed"; failures=$((failures + 1))
  fi
  expect 0 "" -- "$bin" "${gen_args[@]}" --json "$tmp/gen.json"
  expect 0 '"tokenizer": "bytes"' -- cat "$tmp/gen.json"
  expect 2 '"--top-p".*not in \(0, 1\]' -- "$bin" generate "$tmp/gpt" --top-p 1.5
  expect 0 "perplexity    [0-9.]+" -- "$bin" eval "$tmp/gpt" --data "$tmp/text"
  expect 2 "score is for rankers" -- "$bin" score "$tmp/gpt" --data "$tmp/text" --out "$tmp/s.csv"
  expect 2 "model.kind ranker does not read it" -- "$bin" config check \
    "$src/configs/ranker-shop.yaml" --set model.gpt.layers=3
  # A SentencePiece model travels in the checkpoint: generation needs
  # neither the data nor the model's original file.
  expect 0 "" -- "$bin" tokenizer train "$tmp/corpus.txt" --model-prefix "$tmp/spm" --vocab-size 300
  expect 0 "" -- "$bin" convert "$tmp/corpus.txt" --format text \
    --tokenizer "sentencepiece:$tmp/spm.model" --out "$tmp/text-spm"
  expect 0 "trained       6 steps" -- "$bin" "${gpt_args[@]}" --set data.train="$tmp/text-spm" \
    --set data.valid= --set model.gpt.vocab=300 --run-dir "$tmp/gpt-spm"
  rm "$tmp/spm.model"
  expect 0 "tokenizer sentencepiece:.*gpt-spm/checkpoints/step-6/tokenizer.model" -- \
    "$bin" generate "$tmp/gpt-spm" --prompt "The " --max-new-tokens 8
  # So do a GPT-2 BPE's vocab.json and merges.txt.
  cp -r "$tmp/gpt2-tok" "$tmp/gpt2-tok-copy"
  expect 0 "" -- "$bin" convert "$tmp/corpus.txt" --format text \
    --tokenizer "gpt2:$tmp/gpt2-tok-copy" --out "$tmp/text-gpt2"
  expect 0 "trained       6 steps" -- "$bin" "${gpt_args[@]}" --set data.train="$tmp/text-gpt2" \
    --set data.valid= --set model.gpt.vocab=259 --run-dir "$tmp/gpt-gpt2"
  rm -r "$tmp/gpt2-tok-copy"
  expect 0 "tokenizer gpt2:.*gpt-gpt2/checkpoints/step-6" -- \
    "$bin" generate "$tmp/gpt-gpt2" --prompt "The " --max-new-tokens 8

  # Data parallel: two local ranks; then a torchrun-style launch (RANK,
  # WORLD_SIZE, MASTER_* by hand: a TCP store); then a rank killed mid-run
  # fails the job, naming the rank, and leaves no process behind.
  dist_args=(train "$src/configs/ranker-shop.yaml" --set data.train="$tmp/ds" --set data.valid=
             --set model.top=32 --set pipeline.batch_size=16 --set train.torch_threads=1
             --set pipeline.threads=1 --set dist.timeout_s=30 --set optim.warmup_steps=5)
  expect 0 "trained       20 steps" -- "$bin" "${dist_args[@]}" --set train.steps=20 --nproc 2 \
    --run-dir "$tmp/dp2"
  # await_training DIR: up to 60 s for the run's first metrics line (every
  # rank is past start-up), not a fixed sleep that a loaded machine outlasts.
  await_training() {
    for _ in $(seq 600); do [ -s "$1/metrics.jsonl" ] && return 0; sleep 0.1; done; return 1
  }
  port=$((20000 + RANDOM % 20000))
  (RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$bin" "${dist_args[@]}" \
    --set train.steps=20 --run-dir "$tmp/tr" >"$tmp/tr1.log" 2>&1 &)
  expect 0 "rank 0: torchrun: rank 0/2" -- env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$port "$bin" "${dist_args[@]}" --set train.steps=20 --run-dir "$tmp/tr"
  expect 2 "rank 0 of a torchrun job has no --run-dir" -- env RANK=0 WORLD_SIZE=2 "$bin" "${dist_args[@]}"
  # Rank 0 serves the store on MASTER_ADDR only: 127.0.0.1 is not every interface.
  port2=$((port + 2)); hex=$(printf '%04X' "$port2")
  (RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port2 "$bin" "${dist_args[@]}" \
    --set train.steps=20 --run-dir "$tmp/bind" >/dev/null 2>&1 &)
  for _ in $(seq 100); do grep -q ":$hex .* 0A " /proc/net/tcp && break; sleep 0.1; done
  if grep -q "0100007F:$hex .* 0A " /proc/net/tcp && ! grep -q "00000000:$hex .* 0A " /proc/net/tcp; then
    echo "ok: the store listens on 127.0.0.1 only"
  else
    echo "FAIL: the store does not listen on 127.0.0.1 alone"; grep ":$hex " /proc/net/tcp
    failures=$((failures + 1))
  fi
  pkill -f "$tmp/bind" 2>/dev/null
  # A store other hosts can reach needs the job token, even on one host.
  lan=$(ip -4 -o addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
  if [ -n "$lan" ]; then
    (RANK=1 WORLD_SIZE=2 MASTER_ADDR=$lan MASTER_PORT=$((port + 3)) "$bin" "${dist_args[@]}" \
      --set train.steps=20 --run-dir "$tmp/open" >/dev/null 2>&1 &)
    expect 2 "reachable from other hosts, and the job has no token" -- env RANK=0 WORLD_SIZE=2 \
      MASTER_ADDR="$lan" MASTER_PORT=$((port + 3)) "$bin" "${dist_args[@]}" --set train.steps=20 \
      --run-dir "$tmp/open"
    pkill -f "$tmp/open" 2>/dev/null
  else
    echo "skip: no non-loopback address for the token check"
  fi
  # torchrun itself (torch 2.11's, from the project's venv), its agent
  # serving the store: the same run, bitwise, as our launcher's.
  py="${TOPSPIN_PYTHON:-$src/.venv/bin/python}"
  if "$py" -c "import torch.distributed.run" 2>/dev/null; then
    expect 0 "rank 0: torchrun: rank 0/2.*agent store" -- "$py" -m torch.distributed.run \
      --nproc_per_node 2 --master_port $((port + 1)) --no_python \
      "$bin" "${dist_args[@]}" --set train.steps=20 --run-dir "$tmp/trun"
    for run in trun tr; do
      if cmp -s "$tmp/dp2/checkpoints/step-20/model.safetensors" \
             "$tmp/$run/checkpoints/step-20/model.safetensors"; then
        echo "ok: $run gives bitwise the run of --nproc 2"
      else
        echo "FAIL: $run differs from --nproc 2"; failures=$((failures + 1))
      fi
    done
  elif [ "${CI:-}" = true ]; then
    echo "FAIL: $py has no torch (scripts/install-deps.sh installs it)"; failures=$((failures + 1))
  else
    echo "skip: torchrun interop needs torch in $py (scripts/install-deps.sh)"
  fi
  # bench dist end to end, tiny: the ranker and the GPT at every ZeRO stage.
  # Per-rank model state within 5% of the ZeRO formulas, and ZeRO-1/2/3
  # train the GPT to the parameters of plain data parallel (1e-6).
  expect 0 "GPT ZeRO-3 model state" -- "$bin" bench dist --queries 300 --steps 10 \
    --gpt-steps 2 --gpt-batch 2 --scratch "$tmp/bd" --json "$tmp/bd.json"
  if /usr/bin/python3 - "$tmp/bd.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
state = [r for r in rows if "model state" in r["case"]]
same = [r for r in rows if "sum |params|" in r["case"]]
assert len(state) == 7 and len(same) == 3, rows
for r in state:
    assert abs(r["ours"] / r["peer_value"] - 1) <= 0.05, r
for r in same:
    assert abs(r["ours"] / r["peer_value"] - 1) <= 1e-6, r
PY
  then echo "ok: bench dist: ZeRO-0..3 meet the formulas and train the same GPT"
  else echo "FAIL: bench dist ZeRO checks"; failures=$((failures + 1)); fi
  "$bin" "${dist_args[@]}" --set train.steps=1000000 --nproc 2 --set train.log_every=5 \
    --run-dir "$tmp/dpk" >"$tmp/dpk.log" 2>&1 &
  launcher=$!
  await_training "$tmp/dpk"
  kill -9 "$(pgrep -P "$launcher" | tail -1)"
  wait "$launcher"
  rc=$?
  if [ "$rc" -ne 0 ] && grep -qE "the job failed: rank [01] was killed by signal 9" "$tmp/dpk.log" &&
     ! pgrep -f "$tmp/dpk" >/dev/null; then
    echo "ok: a killed rank fails the job, named, and nothing is left behind"
  else
    echo "FAIL: killed rank: exit $rc"; tail -5 "$tmp/dpk.log"; failures=$((failures + 1))
  fi
  # A stalled rank (SIGSTOP) fails the job within one timeout (5 s here;
  # no grace is waited out for a stopped process), and it is the rank named.
  "$bin" "${dist_args[@]}" --set train.steps=1000000 --set dist.timeout_s=5 --nproc 2 \
    --set train.log_every=5 --run-dir "$tmp/dpstop" >"$tmp/dpstop.log" 2>&1 &
  launcher=$!
  await_training "$tmp/dpstop"
  stalled=$(pgrep -P "$launcher" | tail -1)
  stopped_at=$(date +%s)
  kill -STOP "$stalled"
  wait "$launcher"
  rc=$?
  took=$(( $(date +%s) - stopped_at ))
  if [ "$rc" -ne 0 ] && [ "$took" -le 9 ] &&
     grep -qE "the job failed: rank [01] was stopped \(SIGSTOP" "$tmp/dpstop.log" &&
     ! pgrep -f "$tmp/dpstop" >/dev/null; then
    echo "ok: a stopped rank fails the job in ${took} s, named"
  else
    echo "FAIL: stopped rank: exit $rc after ${took} s"; tail -5 "$tmp/dpstop.log"
    failures=$((failures + 1))
  fi

  # SIGINT to the launcher: every rank stops after the same step, rank 0
  # checkpoints it, the launcher exits 130 and says how to continue.
  "$bin" "${dist_args[@]}" --set train.steps=1000000 --nproc 2 --set train.log_every=5 \
    --run-dir "$tmp/dps" >"$tmp/dps.log" 2>&1 &
  launcher=$!
  await_training "$tmp/dps"
  kill -INT "$launcher"
  wait "$launcher"
  rc=$?
  if [ "$rc" -eq 130 ] && grep -q "continue with --resume auto" "$tmp/dps.log" &&
     ls "$tmp/dps/checkpoints" | grep -q "^step-[0-9]*$" && ! pgrep -f "$tmp/dps" >/dev/null; then
    echo "ok: SIGINT stops every rank after a checkpoint"
  else
    echo "FAIL: SIGINT: exit $rc"; tail -5 "$tmp/dps.log"; failures=$((failures + 1))
  fi

  # Two hosts: one rank in each of two network namespaces joined by a veth
  # pair, over TCP with a job token; then a host with the wrong token is
  # refused by name. Needs root and iproute2; skipped otherwise.
  ns="ts$$"
  if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null &&
     ip netns add "${ns}a" 2>/dev/null && ip netns add "${ns}b" 2>/dev/null &&
     ip link add "${ns}va" type veth peer name "${ns}vb" 2>/dev/null &&
     ip link set "${ns}va" netns "${ns}a" && ip link set "${ns}vb" netns "${ns}b" &&
     ip -n "${ns}a" addr add 10.77.0.1/24 dev "${ns}va" && ip -n "${ns}b" addr add 10.77.0.2/24 dev "${ns}vb" &&
     ip -n "${ns}a" link set "${ns}va" up && ip -n "${ns}b" link set "${ns}vb" up &&
     ip -n "${ns}a" link set lo up && ip -n "${ns}b" link set lo up; then
    host() {  # host A|B TOKEN PORT LOG: node rank 0 (A) or 1 (B) of a two-host job
      local side=$1 node=0; [ "$1" = b ] && node=1
      ip netns exec "${ns}$side" env GLOO_SOCKET_IFNAME="${ns}v$side" TOPSPIN_JOB_TOKEN="$2" \
        "$bin" "${dist_args[@]}" --set train.steps=20 --nproc 1 --nnodes 2 --node-rank $node \
        --master-addr 10.77.0.1 --master-port "$3" --run-dir "$tmp/hosts-$3" >"$4" 2>&1
    }
    port=$((20000 + RANDOM % 20000))
    host b s3cret "$port" "$tmp/host-b.log" & other=$!
    host a s3cret "$port" "$tmp/host-a.log"; rc_a=$?; wait "$other"; rc_b=$?
    if [ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] && grep -q "trained       20 steps" "$tmp/host-a.log"; then
      echo "ok: two hosts (network namespaces) train over TCP"
    else
      echo "FAIL: two hosts: exits $rc_a, $rc_b"; tail -n 3 "$tmp/host-a.log" "$tmp/host-b.log"
      failures=$((failures + 1))
    fi
    port=$((port + 1))
    host b wrong "$port" "$tmp/host-b.log" & other=$!
    host a s3cret "$port" "$tmp/host-a.log"; rc_a=$?; wait "$other"; rc_b=$?
    if [ "$rc_a" -ne 0 ] && [ "$rc_b" -ne 0 ] && grep -q "rank 1 was refused" "$tmp/host-a.log"; then
      echo "ok: a host with the wrong job token is refused by name"
    else
      echo "FAIL: wrong token: exits $rc_a, $rc_b"; tail -n 3 "$tmp/host-a.log"; failures=$((failures + 1))
    fi
    # A second host started without the token fails at once on both sides,
    # naming it (not at dist.timeout_s).
    port=$((port + 1))
    start=$(date +%s)
    host b "" "$port" "$tmp/host-b.log" & other=$!
    host a s3cret "$port" "$tmp/host-a.log"; rc_a=$?; wait "$other"; rc_b=$?
    took=$(($(date +%s) - start))
    if [ "$rc_a" -ne 0 ] && [ "$rc_b" -ne 0 ] && [ "$took" -lt 60 ] &&
       grep -q "rank 1 was refused: it has no job token" "$tmp/host-a.log" &&
       grep -q "TOPSPIN_JOB_TOKEN" "$tmp/host-b.log"; then
      echo "ok: a host without the job token fails fast on both sides ($took s)"
    else
      echo "FAIL: no token: exits $rc_a, $rc_b after $took s"; tail -n 3 "$tmp/host-a.log" "$tmp/host-b.log"
      failures=$((failures + 1))
    fi
  else
    echo "skip: two-host test (needs root and iproute2 network namespaces)"
  fi
  ip netns del "${ns}a" 2>/dev/null; ip netns del "${ns}b" 2>/dev/null
fi
shard=$(ls "$tmp"/ds/*.tshard | head -1)
printf '\xff\xff\xff\xff' | dd of="$shard" bs=1 seek=100 conv=notrunc status=none
expect 1 "$(basename "$shard")" -- "$bin" inspect "$tmp/ds" --verify
test ! -e "$tmp/ds2" && echo "ok: failed convert left no output" || { echo "FAIL: ds2 exists"; failures=$((failures + 1)); }

expect 0 "crc32c" -- "$bin" bench core --mib 1 --repeats 1 --json "$tmp/b.json"
grep -q '"ratio"' "$tmp/b.json" && echo "ok: bench json" || { echo "FAIL: bench json"; failures=$((failures + 1)); }

expect 0 "global: mean displacement" -- "$bin" bench order --samples 1000 --block-size 10

# Plans: a scaling fit that recovers Epoch AI's law from exact runs, the
# narrow-band warning, memory, time and the cluster worked example.
awk 'BEGIN { print "N,D,loss"; n = 7e7
  for (i = 0; i < 5; i++) { split("2 5 20 80 200", r, " ")
    for (j = 1; j <= 5; j++) { d = n * r[j]; printf "%g,%g,%.9f\n", n, d, 1.82 + 482.0 / n^0.348 + 2085.4 / d^0.366 }
    n *= 3 } }' > "$tmp/runs.csv"
expect 0 "tokens per parameter +18\.[0-9]" -- "$bin" plan scaling "$tmp/runs.csv" --budget 5.76e23 --bootstrap 20
expect 0 '"tokens_per_parameter"' -- "$bin" plan scaling "$tmp/runs.csv" --budget 5.76e23 --bootstrap 0 --json
awk -F, 'NR == 1 || ($2 / $1 >= 5 && $2 / $1 <= 20)' "$tmp/runs.csv" > "$tmp/narrow.csv"
expect 0 "cannot tell the N term from the D term" -- "$bin" plan scaling "$tmp/narrow.csv" --bootstrap 0
# Run directories: N from config.yaml, D = steps x batch x accumulation x
# context, the loss from summary.json's validation. d160 at 100 steps:
# 204,800 tokens on 670,240 parameters = 0.3056; d32 at 400: 819,200 on 35,744.
i=0
for d in 32 64 96 128 160; do
  for steps in 100 400; do
    r="$tmp/sweep/d$d-s$steps"; mkdir -p "$r"; i=$((i + 1))
    printf 'model: {kind: gpt, gpt: {vocab: 257, context: 64, layers: 2, d_model: %d, heads: 4}}\npipeline: {batch_size: 16}\noptim: {grad_accum: 2}\n' "$d" > "$r/config.yaml"
    printf '{"step": %d, "valid": {"loss": %s}}\n' "$steps" "$(awk -v d=$d -v s=$steps 'BEGIN { print 1 + 30 / d^0.5 + 40 / s^0.4 }')" > "$r/summary.json"
  done
done
expect 0 '"runs": 10' -- "$bin" plan scaling "$tmp/sweep" --bootstrap 0 --json
expect 0 "tokens per parameter in the runs: 0.3056 to 22.92 " -- "$bin" plan scaling "$tmp/sweep" --bootstrap 0
mkdir -p "$tmp/novalid" && cp "$tmp/sweep/d32-s100/config.yaml" "$tmp/novalid/" && echo '{"step": 5}' > "$tmp/novalid/summary.json"
expect 2 "summary.json.*valid.loss.*no validation loss" -- "$bin" plan scaling "$tmp/novalid" "$tmp/sweep"
printf 'N,D,loss\n1e8,1e9,3\n1e8,lots,3\n' > "$tmp/bad.csv"
expect 2 "bad.csv:3.*\"D\".*not a positive number" -- "$bin" plan scaling "$tmp/bad.csv"
expect 0 "fits without sharding" -- "$bin" plan memory "$src/configs/gpt2-124m.yaml" --gpus 8 --gpu h100
expect 0 "set dist.zero: [123]" -- "$bin" plan memory "$src/configs/gpt2-1.5b.yaml" --gpus 8 --gpu a100-40gb --micro-batch 4
expect 2 "did you mean \"h100\"" -- "$bin" plan memory "$src/configs/gpt2-124m.yaml" --gpu h1000
expect 2 "model.kind" -- "$bin" plan memory "$src/configs/ranker-shop.yaml"
expect 0 "cluster-optimal" -- "$bin" plan time "$src/configs/gpt2-124m.yaml" --gpus 8 --gpu h100 --hours 24
"$bin" plan scaling "$tmp/runs.csv" --bootstrap 0 --json > "$tmp/fit.json"
expect 0 "law: .*fit.json" -- "$bin" plan time "$src/configs/gpt2-124m.yaml" --gpus 8 --gpu h100 --hours 24 --law "$tmp/fit.json"
expect 2 "not a .topspin plan scaling --json. fit" -- "$bin" plan time "$src/configs/gpt2-124m.yaml" --gpu h100 --hours 24 --law "$tmp/runs.csv"
expect 2 "excludes" -- "$bin" plan time "$src/configs/gpt2-124m.yaml" --gpu h100 --mfu 0.4 --profile "$tmp"
expect 0 "scale out to 47 nodes" -- "$bin" plan cluster --data 500GB --nodes 10 --cores 8 --memory 32GB
expect 0 "240 tasks would be scheduled" -- "$bin" plan cluster --data 500GB --nodes 10 --cores 8 --tasks-per-core 3
expect 2 "\"lots\" is not a size" -- "$bin" plan cluster --data lots
printf '{"workload": "convert", "setup": "", "rows": [{"case": "csv -> shards, 2 threads", "ours": 40.0}]}' > "$tmp/conv.json"
expect 0 "time from 20.0 MB/s per core \(measured" -- "$bin" plan cluster --data 1GB --from-bench "$tmp/conv.json"
expect 2 "not a .topspin bench convert --json. file" -- "$bin" plan cluster --data 1GB --from-bench "$tmp/runs.csv"
# With the Spark path's row, that is the rate (it is the job the plan sizes).
printf '{"workload": "convert", "rows": [{"case": "csv -> shards, 2 threads", "ours": 40.0}, {"case": "spark local[2] csv -> dataset, per core", "ours": 5.5}]}' > "$tmp/conv-spark.json"
expect 0 "time from 5.5 MB/s per core \(measured.*row .spark local\[2\]" -- "$bin" plan cluster --data 1GB --from-bench "$tmp/conv-spark.json"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
