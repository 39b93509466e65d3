#!/usr/bin/env bash
# Builds and checks topspin on a GPU machine that has CUDA torch, nvcc, CMake,
# Ninja and g++ but none of the Debian -dev packages: unpacks the .deb files
# of gpu-bundle/ (made by scripts/gpu-bundle.sh) into a private prefix, builds
# into build-gpu/, runs the CUDA tests and the rest of ctest, trains the
# ranker on GPU and on CPU from one config and compares the per-step losses,
# runs the benchmarks on the GPU (and `plan memory` against its measured peak). Every result lands in $OUT; summary.json
# has each stage's status (ok/failed/skipped), seconds and key numbers, and is
# rewritten after every stage, so a run cut short still reports.
#
#   bash scripts/gpu-check.sh            # every stage, within GPU_CHECK_BUDGET_S seconds
#   bash scripts/gpu-check.sh --list     # the stages, in order
#   GPU_CHECK_STAGES=env,unpack,configure bash scripts/gpu-check.sh
#   GPU_CHECK_RESUME=1 bash scripts/gpu-check.sh   # a second call on the same
#                                        # machine: only what has not passed
#
# Environment (defaults in brackets):
#   OUT                   where results go [build-gpu/gpu-check-out]
#   GPU_CHECK_PACK        1: results go to BUILD_DIR/gpu-check-out, and OUT
#                         gets summary.json and gpu-check-results.tar.gz of
#                         them all (the device tool brings back 8 files) [0]
#   TOPSPIN_PYTHON        the interpreter whose torch wheel to build against
#                         [/opt/torch/.venv/bin/python, else .venv/bin/python]
#   GPU_CHECK_STAGES      comma-separated stages to run [all]
#   GPU_CHECK_SKIP        comma-separated stages not to run [none], e.g. unpack
#                         on a machine with the Debian packages installed
#   GPU_CHECK_BUDGET_S    wall-clock budget for the whole script [470]
#   GPU_CHECK_RESUME      1: skip the stages an earlier run on this machine
#                         passed (BUILD_DIR/gpu-check-passed.txt) [0]
#   GPU_CHECK_BUILD_DIR   [build-gpu]      GPU_CHECK_PREFIX  [BUILD_DIR/prefix]
#   GPU_CHECK_WORK        scratch for data and runs [BUILD_DIR/work]
#   GPU_CHECK_BUNDLE      the .deb folder [gpu-bundle]
#   GPU_CHECK_JOBS        build jobs [16]   GPU_CHECK_TEST_JOBS  ctest jobs [8]
#   GPU_CHECK_STEPS       ranker steps per device [200]   GPU_CHECK_QUERIES [4000]
#   GPU_CHECK_LOSS_RTOL   per-step relative loss tolerance, GPU vs CPU [1e-3]
#   GPU_CHECK_CMAKE_ARGS  extra cmake configure arguments (word-split)
#   GPU_CHECK_UNPACK      auto | dpkg | ar | python: how .deb files are opened [auto]
#
# Exit status: 0 when every selected stage ran and none failed; 1 when one
# failed or was skipped for lack of time; 2 on bad usage; 143 on a signal.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
all_stages=(env unpack configure build version test-cuda train-data train-gpu train-cpu
            train-compare bench-train-gpt bench-tune-batch bench-train-ranker bench-pipeline
            bench-plan-memory bench-gpt-switches build-rest test)

for arg in "$@"; do
  case "$arg" in
    -h|--help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --list) printf '%s\n' "${all_stages[@]}"; exit 0 ;;
    *) echo "gpu-check.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

pack_to=""
if [ "${GPU_CHECK_PACK:-0}" = 1 ]; then
  pack_to=${OUT:?GPU_CHECK_PACK=1 needs OUT, where the pack goes}
  OUT=${GPU_CHECK_BUILD_DIR:-$root/build-gpu}/gpu-check-out
  [ "${GPU_CHECK_RESUME:-0}" = 1 ] || rm -rf "$OUT"  # a resumed run keeps the earlier logs
fi
OUT=${OUT:-${GPU_CHECK_BUILD_DIR:-$root/build-gpu}/gpu-check-out}
if [ -z "${TOPSPIN_PYTHON:-}" ]; then
  TOPSPIN_PYTHON=/opt/torch/.venv/bin/python
  [ -x "$TOPSPIN_PYTHON" ] || [ ! -x "$root/.venv/bin/python" ] || TOPSPIN_PYTHON=$root/.venv/bin/python
fi
export TOPSPIN_PYTHON  # `topspin bench` runs its Python peers with it
stages=${GPU_CHECK_STAGES:-all}
skip=${GPU_CHECK_SKIP:-}
budget=${GPU_CHECK_BUDGET_S:-470}
build=${GPU_CHECK_BUILD_DIR:-$root/build-gpu}
# Under the build folder, which a second call on a warm machine finds again.
prefix=${GPU_CHECK_PREFIX:-$build/prefix}
work=${GPU_CHECK_WORK:-$build/work}
resume=${GPU_CHECK_RESUME:-0}
passed_file=$build/gpu-check-passed.txt
bundle=${GPU_CHECK_BUNDLE:-$root/gpu-bundle}
jobs=${GPU_CHECK_JOBS:-16}
test_jobs=${GPU_CHECK_TEST_JOBS:-8}
steps=${GPU_CHECK_STEPS:-200}
queries=${GPU_CHECK_QUERIES:-4000}
rtol=${GPU_CHECK_LOSS_RTOL:-1e-3}
unpack_method=${GPU_CHECK_UNPACK:-auto}
topspin=$build/topspin
libdir=$prefix/usr/lib/x86_64-linux-gnu

if [ "$stages" != all ] || [ -n "$skip" ]; then
  for s in ${stages//,/ } ${skip//,/ }; do
    [ "$s" != all ] || continue
    [[ " ${all_stages[*]} " == *" $s "* ]] ||
      { echo "gpu-check.sh: unknown stage '$s'; stages: ${all_stages[*]}" >&2; exit 2; }
  done
fi

mkdir -p "$OUT" "$work" "$build" || { echo "gpu-check.sh: cannot create $OUT or $work" >&2; exit 1; }
[ "$resume" = 1 ] || : >"$passed_file"  # a fresh run: nothing has passed yet
cd "$root" || exit 1

# The bundle's libraries and headers, for configure, build, tests and runs.
# CPLUS_INCLUDE_PATH (not -I) makes CMake treat the prefix's include folder
# like /usr/include: implicit, searched after the torch wheel's own headers
# (it ships fmt 12; Debian's libfmt is 9), as on a Debian machine.
# LD_LIBRARY_PATH gets the prefix only once topspin runs (the build tree's
# RUNPATH already names it): the machine's own tools must not load Debian's
# libraries.
run_library_path=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CPLUS_INCLUDE_PATH=$prefix/usr/include${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}
export PKG_CONFIG_PATH=$libdir/pkgconfig:$prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
if ! command -v nvcc >/dev/null 2>&1; then
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    if [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then export PATH=$d/bin:$PATH; break; fi
  done
fi

# ---- bookkeeping -----------------------------------------------------------

t0=$(date +%s)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
declare -A st_status st_secs st_note st_nums
ran=()
current=""
stage_start=0
stage_deadline=0
incomplete=()  # stages skipped for lack of time

now() { date +%s; }
left() { echo $((t0 + budget - $(now))); }
say() { echo "gpu-check.sh: $*"; }

json_str() {
  local s
  s=$(printf '%s' "$1" | tr -d '\000-\010\013\014\016-\037')
  s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\t'/\\t}; s=${s//$'\r'/}
  printf '"%s"' "$s"
}
# num KEY VALUE: a key number of the current stage (VALUE: JSON number, true,
# false or null; anything else is stored as a string).
num() {
  local v=$2
  if ! [[ "$v" =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$|^(true|false|null)$ ]]; then v=$(json_str "$v"); fi
  st_nums[$current]+="${st_nums[$current]:+, }$(json_str "$1"): $v"
}
str() { st_nums[$current]+="${st_nums[$current]:+, }$(json_str "$1"): $(json_str "$2")"; }
note() { st_note[$current]+="${st_note[$current]:+; }$*"; }

write_summary() {
  local failed=() s first=1 ok=true
  for s in "${ran[@]}"; do [ "${st_status[$s]}" = failed ] && failed+=("$s"); done
  [ ${#failed[@]} -eq 0 ] && [ ${#incomplete[@]} -eq 0 ] || ok=false
  {
    printf '{\n  "script": "scripts/gpu-check.sh",\n  "started": "%s",\n' "$started"
    printf '  "seconds": %s,\n  "budget_s": %s,\n  "ok": %s,\n' "$(($(now) - t0))" "$budget" "$ok"
    printf '  "failed": ['
    for s in "${failed[@]}"; do printf '%s%s' "$([ $first -eq 1 ] || echo ', ')" "$(json_str "$s")"; first=0; done
    printf '],\n  "out_of_time": ['
    first=1
    for s in "${incomplete[@]}"; do printf '%s%s' "$([ $first -eq 1 ] || echo ', ')" "$(json_str "$s")"; first=0; done
    printf '],\n  "loss_rtol": %s,\n  "stages": [\n' "$rtol"
    first=1
    for s in "${ran[@]}"; do
      [ $first -eq 1 ] || printf ',\n'
      first=0
      printf '    {"name": %s, "status": %s, "seconds": %s, "note": %s, "numbers": {%s}}' \
        "$(json_str "$s")" "$(json_str "${st_status[$s]}")" "${st_secs[$s]:-0}" \
        "$(json_str "${st_note[$s]:-}")" "${st_nums[$s]:-}"
    done
    printf '\n  ]\n}\n'
  } >"$OUT/summary.json.tmp" && mv "$OUT/summary.json.tmp" "$OUT/summary.json"
}

# GPU_CHECK_PACK=1: summary.json and one archive of everything, into OUT.
pack() {
  [ -n "$pack_to" ] || return 0
  mkdir -p "$pack_to" && cp "$OUT/summary.json" "$pack_to/summary.json" &&
    tar -C "$OUT" -czf "$pack_to/gpu-check-results.tar.gz.tmp" . &&
    mv "$pack_to/gpu-check-results.tar.gz.tmp" "$pack_to/gpu-check-results.tar.gz" &&
    { [ "${1:-}" = quiet ] || say "packed $OUT into $pack_to/gpu-check-results.tar.gz"; }
}

# A signal (the device tool's limit, ^C) ends the running command, marks the
# stage failed and still writes summary.json. Commands run in the background
# and are waited for, so that the trap runs at once (bash defers traps until a
# foreground command ends, and `timeout` puts its command in its own process
# group, out of reach of a signal to ours).
tmo_pid=""
on_signal() {
  trap - TERM INT HUP
  [ -z "$tmo_pid" ] || kill -TERM "$tmo_pid" 2>/dev/null
  if [ -n "$current" ]; then
    st_status[$current]=failed
    st_secs[$current]=$(($(now) - ${stage_start:-$(now)}))
    note "killed by a signal after $(($(now) - t0)) s of the script"
  fi
  write_summary
  pack
  say "stopped by a signal; $OUT/summary.json"
  exit 143
}
trap on_signal TERM INT HUP

# tmo CMD...: CMD under `timeout`, limited to what is left of the stage.
tmo() {
  local t=$((stage_deadline - $(now)))
  [ $t -ge 1 ] || t=1
  timeout -k 10 "$t" "$@" </dev/null &
  tmo_pid=$!
  wait "$tmo_pid"
  local rc=$?
  tmo_pid=""
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    note "timed out: $1 ${2:-} ... (limit ${t} s)"
    echo "gpu-check.sh: TIMED OUT after ${t} s: $*"
  fi
  return $rc
}

enabled() {
  [[ ",$skip," != *",$1,"* ]] && { [ "$stages" = all ] || [[ ",$stages," == *",$1,"* ]]; }
}

# stage NAME CAP_S MIN_S: runs stage_NAME (0 ok, 77 skipped, else failed) into
# $OUT/NAME.log, with at most CAP_S seconds; skipped when fewer than MIN_S are
# left of the budget.
stage() {
  local name=$1 cap=$2 min=$3 fn=stage_${1//-/_} rc t start remaining
  current=$name
  ran+=("$name")
  if ! enabled "$name"; then
    st_status[$name]=skipped st_secs[$name]=0
    note "not selected (GPU_CHECK_STAGES / GPU_CHECK_SKIP)"
    current=""
    return 0
  fi
  if [ "$resume" = 1 ] && [ "$name" != env ] && grep -qxF "$name" "$passed_file" 2>/dev/null &&
     { [ "$name" != unpack ] || [ -x "$prefix/pkg-config" ]; }; then
    st_status[$name]=ok st_secs[$name]=0
    note "passed in an earlier run on this machine (GPU_CHECK_RESUME=1); its log and numbers are that run's"
    current=""
    return 0
  fi
  remaining=$(left)
  if [ "$remaining" -lt "$min" ]; then
    st_status[$name]=skipped st_secs[$name]=0
    note "out of time: ${remaining} s left of the ${budget} s budget, the stage needs ${min}"
    incomplete+=("$name")
    say "$name: skipped (out of time)"
    current=""
    write_summary
    return 0
  fi
  t=$((cap < remaining ? cap : remaining))
  start=$(now)
  stage_start=$start
  stage_deadline=$((start + t))
  say "$name: running (at most ${t} s; log $OUT/$name.log)"
  "$fn" >"$OUT/$name.log" 2>&1
  rc=$?
  st_secs[$name]=$(($(now) - start))
  case $rc in
    0) st_status[$name]=ok; echo "$name" >>"$passed_file" ;;
    77) st_status[$name]=skipped ;;
    *) st_status[$name]=failed; [ -n "${st_note[$name]:-}" ] || note "exit status $rc; see $name.log" ;;
  esac
  say "$name: ${st_status[$name]} in ${st_secs[$name]} s${st_note[$name]:+ (${st_note[$name]})}"
  current=""
  write_summary
  pack quiet  # a run cut short still brings back what it did
}

need_topspin() {
  [ -x "$topspin" ] && return 0
  note "no $topspin (the build failed?)"
  return 77
}

py() {  # the torch interpreter, else any python3 (the comparison needs no torch)
  if [ -x "$TOPSPIN_PYTHON" ]; then "$TOPSPIN_PYTHON" "$@"; else python3 "$@"; fi
}

# ---- stages ----------------------------------------------------------------

# Everything about the machine, written first so that any failure still says
# where it ran.
# shellcheck disable=SC2016  # each section is a command line for bash -c
stage_env() {
  local f=$OUT/env.txt
  : >"$f"
  export started root bundle TOPSPIN_PYTHON
  section() {
    { echo "==== $1"; timeout -k 5 60 bash -c "$1" 2>&1; echo; } >>"$f"
  }
  section 'date -u; echo "script started $started"; nproc; free -g; df -h /tmp "$PWD"'
  section 'uname -a'
  section 'cat /etc/os-release'
  section 'ldd --version | head -1; getconf GNU_LIBC_VERSION'
  section 'command -v g++ c++ gcc; g++ --version | head -1'
  section 'f=$(g++ -print-file-name=libstdc++.so.6); echo "$f"; strings -a "$f" | grep -E "^GLIBCXX_[0-9.]+$" | sort -V | tail -1'
  section 'command -v cmake ninja make; cmake --version | head -1; ninja --version'
  section 'command -v nvcc; nvcc --version; echo "CUDA_HOME=${CUDA_HOME:-}"; ls -d /usr/local/cuda*'
  section 'nvidia-smi'
  section 'nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv'
  section 'echo "TOPSPIN_PYTHON=$TOPSPIN_PYTHON"; "$TOPSPIN_PYTHON" -c "
import sys, importlib.util as u
print(sys.version)
import torch, torch.utils
print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"available\", torch.cuda.is_available(), \"devices\", torch.cuda.device_count())
if torch.cuda.is_available(): print(\"device\", torch.cuda.get_device_name(0), \"capability\", torch.cuda.get_device_capability(0))
print(\"cxx11abi\", torch.compiled_with_cxx11_abi())
print(\"cmake_prefix_path\", torch.utils.cmake_prefix_path)
print(\"modules\", {m: u.find_spec(m) is not None for m in [\"numpy\", \"pandas\", \"xgboost\"]})
"'
  section 'command -v python3; python3 --version'
  section 'for t in dpkg-deb ar tar xz zstd pkg-config pkgconf strings timeout git; do printf "%-10s %s\n" "$t" "$(command -v "$t" || echo missing)"; done'
  section 'echo "PATH=$PATH"; echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; echo "CPLUS_INCLUDE_PATH=$CPLUS_INCLUDE_PATH"; echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}"'
  section 'git -C "$root" log -1 --format="%H %s"; git -C "$root" status --short | head -20'
  section 'head -5 "$bundle/MANIFEST.tsv"'
  unset -f section
  str glibc "$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
  str gxx "$(g++ -dumpfullversion 2>/dev/null || echo none)"
  str cmake "$(cmake --version 2>/dev/null | awk 'NR==1{print $3}')"
  str nvcc "$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  str gpu "$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  str driver "$(timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
  str torch "$(sed -n 's/^torch \(.*\)/\1/p' "$f" | head -1)"
  cat "$f"
  [ -x "$TOPSPIN_PYTHON" ] || { note "no interpreter at $TOPSPIN_PYTHON (set TOPSPIN_PYTHON)"; return 1; }
  return 0
}

# unpack_deb DEB DEST
unpack_deb() {
  local deb=$1 dest=$2 method=$unpack_method
  if [ "$method" = auto ]; then
    if command -v dpkg-deb >/dev/null; then method=dpkg
    elif command -v ar >/dev/null && command -v tar >/dev/null && command -v xz >/dev/null; then method="ar"
    else method=python; fi
  fi
  case $method in
    dpkg) dpkg-deb -x "$deb" "$dest" ;;
    ar)
      local tmp
      tmp=$(mktemp -d) || return 1
      (cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$dest")
      local rc=$?
      rm -rf "$tmp"
      return $rc ;;
    python)
      py - "$deb" "$dest" <<'EOF'
import io, sys, tarfile
deb, dest = sys.argv[1], sys.argv[2]
data = open(deb, "rb").read()
assert data[:8] == b"!<arch>\n", deb + ": not an ar archive"
pos = 8
while pos < len(data):
    name = data[pos:pos + 16].decode().strip().rstrip("/")
    size = int(data[pos + 48:pos + 58].decode().strip())
    body = data[pos + 60:pos + 60 + size]
    pos += 60 + size + (size & 1)
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as t:
            kw = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
            t.extractall(dest, **kw)
        break
else:
    sys.exit(deb + ": no data.tar member")
EOF
      ;;
    *) echo "GPU_CHECK_UNPACK=$method: use auto, dpkg, ar or python"; return 2 ;;
  esac
}

stage_unpack() {
  local manifest=$bundle/MANIFEST.tsv debs=() bad=0 f
  if [ ! -f "$manifest" ]; then
    echo "no $manifest: run scripts/gpu-bundle.sh on the Debian machine and carry gpu-bundle/"
    note "no gpu-bundle/MANIFEST.tsv (run scripts/gpu-bundle.sh; carry gpu-bundle)"
    return 1
  fi
  # Every file the manifest names, with its checksum.
  while IFS=$'\t' read -r pkg ver _arch _bytes sha file; do
    [[ "$pkg" == \#* || "$pkg" == package || -z "$pkg" ]] && continue
    f=$bundle/$file
    if [ ! -f "$f" ]; then echo "missing $file ($pkg $ver)"; bad=1; continue; fi
    if [ "$(sha256sum "$f" | cut -d' ' -f1)" != "$sha" ]; then echo "checksum differs: $file"; bad=1; continue; fi
    debs+=("$f")
  done <"$manifest"
  [ $bad -eq 0 ] || { note "gpu-bundle/ does not match its MANIFEST.tsv (rerun scripts/gpu-bundle.sh)"; return 1; }
  rm -rf "$prefix"
  mkdir -p "$prefix" || return 1
  for f in "${debs[@]}"; do
    echo "unpack $(basename "$f")"
    unpack_deb "$f" "$prefix" || { note "could not unpack $(basename "$f")"; return 1; }
  done
  num packages "${#debs[@]}"

  # .pc files say prefix=/usr (and some -I/usr/include): point them here.
  while IFS= read -r -d '' f; do
    sed -i -E "s#^([A-Za-z_][A-Za-z0-9_]*)=/usr(/|\$)#\\1=$prefix/usr\\2#; s#(-[IL])/usr/#\\1$prefix/usr/#g" "$f"
    echo "fixed $f: $(grep -m1 -E '^(prefix|libdir|includedir)=' "$f")"
  done < <(find "$prefix" -name '*.pc' -print0)
  # Debian's CMake package files locate themselves (the only /usr paths are in
  # the "/usr move" symlink guard); rewrite any other absolute /usr path that
  # this prefix holds, and report those it does not.
  while IFS= read -r -d '' f; do
    grep -n '"/usr/' "$f" | grep -v -e '_realOrig' -e 'set(_IMPORT_PREFIX "/usr/lib' -e 'PACKAGE_PREFIX_DIR "/usr"' |
      grep -oE '"/usr/[^"$]+"' | tr -d '"' | sort -u | while read -r p; do
        if [ -e "$prefix$p" ]; then
          sed -i "s#\"$p\"#\"$prefix$p\"#g" "$f"; echo "fixed $f: $p"
        else
          echo "left $f: $p (not in the bundle; harmless unless that package is used)"
        fi
      done
  done < <(find "$prefix" -name '*.cmake' -print0)
  # Absolute symbolic links would point at the machine's /usr.
  while IFS= read -r -d '' f; do
    local target
    target=$(readlink "$f")
    if [ -e "$prefix$target" ]; then ln -sfn "$prefix$target" "$f"; echo "relinked $f"; fi
  done < <(find "$prefix" -type l -lname '/*' -print0)

  # pkgconf has no RUNPATH: a wrapper gives it the prefix's libpkgconf.
  cat >"$prefix/pkg-config" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$prefix/usr/bin/pkgconf" "\$@"
EOF
  chmod +x "$prefix/pkg-config"

  # Can every bundled library load here (glibc and libstdc++ versions)?
  local needs have problems=0
  needs=$(sed -n 's/^# needs-glibc\tGLIBC_//p' "$manifest")
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  str needs_glibc "${needs:-unknown}"
  if [ -n "$needs" ] && [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$needs" "$have" | sort -V | head -1)" != "$needs" ]; then
    note "glibc $have is older than the $needs the Debian 12 libraries need"
    problems=1
  fi
  while IFS= read -r -d '' f; do
    local out
    out=$(LD_LIBRARY_PATH=$run_library_path ldd "$f" 2>&1 | grep -E 'not found' || true)  # scripts (pcre2-config) are not ELF
    if [ -n "$out" ]; then echo "ldd $f:"; echo "$out"; problems=1; fi
  done < <(find "$libdir" "$prefix/usr/bin" -type f \( -name '*.so*' -o -perm -u+x \) -print0 2>/dev/null)
  [ $problems -eq 0 ] || { note "some bundled libraries do not load here (see unpack.log)"; return 1; }
  num prefix_bytes "$(du -sb "$prefix" | cut -f1)"
  echo "prefix $prefix ready"
}

stage_configure() {
  local args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
              "-DTOPSPIN_PYTHON=$TOPSPIN_PYTHON" -DTOPSPIN_WITH_TORCH=ON
              -DCMAKE_CUDA_STANDARD=17 -DTORCH_CUDA_ARCH_LIST=9.0
              "-DCMAKE_PREFIX_PATH=$prefix/usr;$libdir/cmake;$prefix/usr/share/cmake"
              "-DCMAKE_INCLUDE_PATH=$prefix/usr/include"
              "-DCMAKE_LIBRARY_PATH=$libdir;$prefix/usr/lib")
  command -v ninja >/dev/null && [ ! -f "$build/Makefile" ] && args+=(-G Ninja)
  command -v nvcc >/dev/null && args+=("-DCMAKE_CUDA_COMPILER=$(command -v nvcc)")
  # pkg-config: the bundle's pkgconf (through its wrapper), else the machine's.
  if "$prefix/pkg-config" --version >/dev/null 2>&1; then
    args+=("-DPKG_CONFIG_EXECUTABLE=$prefix/pkg-config")
  elif command -v pkg-config >/dev/null; then
    args+=("-DPKG_CONFIG_EXECUTABLE=$(command -v pkg-config)")
  else
    note "no working pkg-config (bundle or machine)"
  fi
  # shellcheck disable=SC2206
  [ -z "${GPU_CHECK_CMAKE_ARGS:-}" ] || args+=(${GPU_CHECK_CMAKE_ARGS})
  printf 'cmake'; printf ' %q' "${args[@]}"; echo
  tmo cmake "${args[@]}"
  local rc=$?
  local v
  v=$(sed -n 's/.*LibTorch from the torch \([^ ]*\) wheel.*/\1/p' "$OUT/configure.log" | head -1)
  [ -z "$v" ] || str torch_wheel "$v"
  if [ $rc -ne 0 ]; then
    for f in CMakeFiles/CMakeError.log CMakeFiles/CMakeConfigureLog.yaml CMakeCache.txt; do
      [ -f "$build/$f" ] && tail -c 400000 "$build/$f" >"$OUT/configure-$(basename "$f")"
    done
    note "cmake configure failed (configure.log; configure-CMake*.log)"
    return 1
  fi
  str pkg_config "$(sed -n 's/^PKG_CONFIG_EXECUTABLE:FILEPATH=//p' "$build/CMakeCache.txt")"
  # Which packages were found where (the prefix, not the machine).
  grep -E '^(fmt|spdlog|yaml-cpp|nlohmann_json|CLI11|GTest|zstd|Torch)_DIR|^XXHASH_|^PKG_CONFIG_EXECUTABLE|^CMAKE_CUDA_COMPILER:' \
    "$build/CMakeCache.txt" | tee "$OUT/configure-found.txt"
}

# build: what the GPU stages need (topspin, and train_test, which holds the
# Cuda* tests); build-rest: everything else, for the test stage.
build_targets() {
  [ -f "$build/CMakeCache.txt" ] || { note "not configured"; return 77; }
  local keep=(-k 0)
  [ -f "$build/build.ninja" ] || keep=(-k)
  tmo cmake --build "$build" -j "$jobs" "$@" -- "${keep[@]}"
  local rc=$?
  local failed
  failed=$(grep -c '^FAILED:' "$OUT/$current.log")
  num failed_targets "$failed"
  if [ $rc -ne 0 ]; then
    grep -n -A 30 -E '^FAILED:|error:' "$OUT/$current.log" | head -400 >"$OUT/$current-errors.txt"
    note "build failed ($failed targets; $current-errors.txt)"
    [ -x "$topspin" ] && note "topspin itself was built: later stages use it"
    return 1
  fi
}
stage_build() { build_targets --target topspin train_test; }
stage_build_rest() { build_targets; }

stage_version() {
  need_topspin || return 77
  tmo "$topspin" version >"$OUT/version.txt"
  local rc=$?
  cat "$OUT/version.txt"
  str cuda "$(sed -n 's/^ *cuda *//p' "$OUT/version.txt" | head -1)"
  str libtorch "$(sed -n 's/^ *libtorch *//p' "$OUT/version.txt" | head -1)"
  str gpu "$(sed -n 's/^ *gpu 0 *//p' "$OUT/version.txt" | head -1)"
  grep -q '^ *gpu 0 ' "$OUT/version.txt" || { note "topspin sees no GPU"; return 1; }
  return "$rc"
}

# GPU tests have Cuda in their suite name (CudaDevice.*, CudaRanker.*): the
# regex looks at the suite, not the case (ComputeDevice.CudaWithout... is a
# CPU test).
cuda_tests='^[^.]*Cuda[^.]*\.'

# ctest_numbers LOG: passed/failed/skipped/total from ctest's summary.
ctest_numbers() {
  local line skipped
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" | tail -1)
  local failed=0 total=0
  if [ -n "$line" ]; then
    failed=$(sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/' <<<"$line")
    total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
    num total "$total"; num failed "$failed"
  fi
  skipped=$(grep -cE '^\s+[0-9]+ - .* \(Skipped\)' "$1")
  num skipped "$skipped"
  [ -z "$line" ] || num passed $((total - failed - skipped))
  local bad
  bad=$(grep -E '^\s+[0-9]+ - .* \((Failed|Timeout|SEGFAULT|Subprocess aborted|Not Run|Exception|Child aborted)' "$1" |
        sed -E 's/^\s+[0-9]+ - //' | head -5 | tr '\n' ';' | sed 's/;$//; s/;/; /g')
  [ -z "$bad" ] || note "failing: $bad"
}

stage_test_cuda() {
  [ -f "$build/CTestTestfile.cmake" ] || { note "not configured"; return 77; }
  tmo ctest --test-dir "$build" -R "$cuda_tests" --output-on-failure --no-tests=error --timeout 120 \
    --output-junit "$OUT/ctest-cuda.xml"
  local rc=$?
  ctest_numbers "$OUT/test-cuda.log"
  if grep -q 'No tests were found' "$OUT/test-cuda.log"; then
    note "no test suite has Cuda in its name"
  fi
  # Here a skipped GPU test means the tests did not see the GPU.
  if grep -qE '^\s+[0-9]+ - .* \(Skipped\)' "$OUT/test-cuda.log"; then
    note "GPU tests skipped on the GPU machine: $(grep -E '^\s+[0-9]+ - .* \(Skipped\)' "$OUT/test-cuda.log" |
      sed -E 's/^\s+[0-9]+ - //; s/ \(Skipped\)//' | head -5 | tr '\n' ' ')"
    [ $rc -ne 0 ] || rc=1
  fi
  return $rc
}

stage_test() {
  [ -f "$build/CTestTestfile.cmake" ] || { note "not configured"; return 77; }
  # The GPU tests ran in test-cuda; the end-to-end scripts take minutes;
  # bpe_vs_hf (the tokenizer against Hugging Face's, CPU only) needs the
  # tokenizers module, which the GPU image's interpreter may lack.
  tmo ctest --test-dir "$build" -E "cli_end_to_end|report_chromium|bpe_vs_hf|$cuda_tests" -j "$test_jobs" \
    --output-on-failure --timeout 120 --output-junit "$OUT/ctest.xml"
  local rc=$?
  ctest_numbers "$OUT/test.log"
  return $rc
}

stage_train_data() {
  need_topspin || return 77
  rm -rf "$work/raw" "$work/train" "$work/valid"
  tmo "$topspin" gen shop --queries "$queries" --out "$work/raw" || return 1
  tmo "$topspin" convert "$work/raw/shop.csv" --format csv --label label --group qid \
    --out "$work/train" || return 1
  tmo "$topspin" gen shop --queries 500 --seed 2 --format shards --out "$work/valid" || return 1
  num train_queries "$queries"
}

# train_on DEVICE: the ranker from configs/ranker-shop.yaml on DEVICE.
train_on() {
  local dev=$1 run=$work/run-$1 label=cpu
  [ "$dev" != cuda ] || label=gpu
  need_topspin || return 77
  [ -f "$work/train/manifest.json" ] || { note "no training data (train-data failed)"; return 77; }
  rm -rf "$run"
  local sampler=""
  if [ "$dev" = cuda ] && command -v nvidia-smi >/dev/null; then
    # Evidence that the GPU was used: utilization and memory while it trains
    # (compute processes too, which containers often hide).
    ( while :; do
        timeout 5 nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits 2>/dev/null |
          head -1 | sed 's/^/gpu, /'
        timeout 5 nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits 2>/dev/null |
          sed 's/^/app, /'
        sleep 1
      done >"$OUT/train-gpu-nvidia-smi.txt" ) &
    sampler=$!
  fi
  local start rc
  start=$(now)
  tmo "$topspin" train configs/ranker-shop.yaml --run-dir "$run" \
    --set data.train="$work/train" --set data.valid="$work/valid" \
    --set train.steps="$steps" --set train.log_every=1 --set train.eval_every=100 \
    --set train.checkpoint_every=100 --set train.torch_threads=8 --set train.device="$dev"
  rc=$?
  num seconds_wall $(($(now) - start))
  if [ -n "$sampler" ]; then
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    local smi=$OUT/train-gpu-nvidia-smi.txt
    num gpu_util_max_pct "$(awk -F', ' '$1 == "gpu" {print $2 + 0}' "$smi" | sort -n | tail -1)"
    num gpu_mem_used_max_mib "$(awk -F', ' '$1 == "gpu" {print $3 + 0}' "$smi" | sort -n | tail -1)"
    if grep -q '^app, .*topspin' "$smi"; then num process_seen_on_gpu true; else num process_seen_on_gpu false; fi
  fi
  local log=$OUT/$current.log
  num docs_per_s "$(grep -oE '[0-9.]+ docs/s' "$log" | head -1 | cut -d' ' -f1)"
  num last_loss "$(sed -n 's/.*last loss \([-0-9.naif]*\).*/\1/p' "$log" | head -1)"
  num valid_ndcg10 "$(sed -n 's/.*NDCG@10 \([0-9.]*\).*/\1/p' "$log" | head -1)"
  [ -f "$run/metrics.jsonl" ] && cp "$run/metrics.jsonl" "$OUT/train-$label-metrics.jsonl"
  grep -q 'train.device' "$log" && note "$(grep -m1 'train.device' "$log")"
  return $rc
}
stage_train_gpu() { train_on cuda; }
stage_train_cpu() { train_on cpu; }

stage_train_compare() {
  local g=$OUT/train-gpu-metrics.jsonl c=$OUT/train-cpu-metrics.jsonl
  [[ -f "$g" && -f "$c" ]] || { note "needs both runs' metrics.jsonl"; return 77; }
  py - "$g" "$c" "$rtol" "$steps" "$OUT/ranker_gpu_vs_cpu.json" <<'EOF'
import json, math, sys
gpu_path, cpu_path, rtol, steps, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def losses(path):
    by_step = {}
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        j = json.loads(line)
        if "loss" in j and "step" in j:  # a training record (evaluations carry valid/...)
            v = j["loss"]
            by_step[int(j["step"])] = float(v) if not isinstance(v, str) else float(v)  # "nan"/"inf"
    return by_step
g, c = losses(gpu_path), losses(cpu_path)
common = sorted(set(g) & set(c))
rows, max_abs, max_rel, worst, nonfinite = [], 0.0, 0.0, None, []
for s in common:
    a, b = g[s], c[s]
    if not (math.isfinite(a) and math.isfinite(b)):
        nonfinite.append(s)
        continue
    d = abs(a - b)
    r = d / max(abs(b), 1e-12)
    rows.append({"step": s, "gpu": a, "cpu": b, "abs": d, "rel": r})
    if r > max_rel:
        max_rel, worst = r, s
    max_abs = max(max_abs, d)
problems = []
if len(common) < steps:
    problems.append(f"{len(common)} common steps, expected {steps} (gpu {len(g)}, cpu {len(c)})")
if nonfinite:
    problems.append(f"non-finite loss at steps {nonfinite[:10]}")
if max_rel > rtol:
    problems.append(f"max relative difference {max_rel:.3g} at step {worst} > {rtol:g}")
identical = bool(rows) and max_abs == 0.0
if identical:
    problems.append(f"GPU and CPU losses are bitwise identical over {len(rows)} steps: "
                    "the GPU run most likely ran on the CPU")
result = {
    "tolerance": {"per_step_relative": rtol, "rule": "|gpu - cpu| / |cpu| <= tolerance at every step"},
    "steps_compared": len(rows), "steps_gpu": len(g), "steps_cpu": len(c),
    "max_abs_diff": max_abs, "max_rel_diff": max_rel, "worst_step": worst,
    "first": rows[0] if rows else None, "last": rows[-1] if rows else None,
    "bitwise_identical": identical,
    "pass": not problems, "problems": problems,
    "per_step": rows,
}
json.dump(result, open(out, "w"), indent=1)
print(f"tolerance: per-step relative loss difference <= {rtol:g}")
print(f"steps compared {len(rows)}; max abs {max_abs:.3g}; max rel {max_rel:.3g} (step {worst})")
print("PASS" if not problems else "FAIL: " + "; ".join(problems))
sys.exit(0 if not problems else 1)
EOF
  local rc=$?
  if [ -f "$OUT/ranker_gpu_vs_cpu.json" ]; then
    local vals
    vals=$(py -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["steps_compared"], r["max_abs_diff"], r["max_rel_diff"], str(r["bitwise_identical"]).lower())' "$OUT/ranker_gpu_vs_cpu.json")
    read -r n a r ident <<<"$vals"
    num steps_compared "$n"; num max_abs_diff "$a"; num max_rel_diff "$r"; num bitwise_identical "$ident"
  fi
  [ $rc -eq 0 ] || note "$(tail -1 "$OUT/train-compare.log")"
  return $rc
}

# has_flag SUB FLAG: whether `topspin bench SUB --help` lists FLAG.
declare -A bench_help
has_flag() {
  [ -n "${bench_help[$1]:-}" ] || bench_help[$1]=$(timeout 30 "$topspin" bench "$1" --help 2>&1)
  grep -q -- "$2" <<<"${bench_help[$1]}"
}

run_bench() {
  local sub=$1; shift
  need_topspin || return 77
  local args=(bench "$sub" --json "$OUT/$current.json")
  if has_flag "$sub" --device; then
    args+=(--device cuda); str device cuda
  else
    note "no --device flag in this binary: ran on the CPU"; str device cpu
  fi
  local f
  for f in --peer-python --python; do
    if has_flag "$sub" "$f "; then args+=("$f" "$TOPSPIN_PYTHON"); break; fi
  done
  local a v
  while [ $# -gt 0 ]; do
    a=$1; shift
    if [ $# -gt 0 ] && [[ "$1" != --* ]]; then  # --flag VALUE
      v=$1; shift
      if has_flag "$sub" "$a"; then args+=("$a" "$v"); fi
    elif has_flag "$sub" "$a"; then  # a switch
      args+=("$a")
    fi
  done
  printf 'topspin'; printf ' %q' "${args[@]}"; echo
  tmo "$topspin" "${args[@]}"
  local rc=$?
  grep -q 'peer failed' "$OUT/$current.log" &&
    note "a Python peer failed (peers run \$TOPSPIN_PYTHON=$TOPSPIN_PYTHON and need torch, numpy, pandas, xgboost; env.txt says which it has)"
  [ -f "$OUT/$current.json" ] && str json "$current.json"
  return $rc
}
# The tree peers are CPU work (measured in docs/BENCHMARKS.md) and the GPU
# image has no xgboost or lightgbm.
stage_bench_train_ranker() {
  run_bench train-ranker --queries 2000 --valid-queries 500 --epochs 1 --batch 32 --threads 8 \
    --no-trees --repeats 1
}
# The GPT target of the GPT issue: GPT-2 124M (vocabulary 50304) at context
# 1024 in bf16 against nanoGPT eager and torch.compile on the same GPU
# (fp32 is left to bench-gpt-switches, for time).
stage_bench_train_gpt() {
  run_bench train-gpt --layers 12 --d-model 768 --heads 12 --context 1024 --vocab 50304 \
    --batch 8 --warmup 3 --steps 12 --no-fp32 --scratch "$work/bench"
}
# The AutoTuner's GPU target: the micro-batch it picks for GPT-2 124M
# (bf16, context 1024) under 80% of the GPU's memory with its 10% margin,
# against the largest that fits there (Lightning's finder, no margin).
stage_bench_tune_batch() {
  run_bench tune --batch-config configs/gpt2-124m.yaml --set optim.grad_accum=1 \
    --set train.torch_threads=8 --scratch "$work/bench"
}
# Each speed-up switched off against all on (ours, fp32 with TF32 the
# switch it is), GPT-2 124M: what attention, fused ops, fused AdamW, TF32
# and vocabulary padding buy on the GPU.
stage_bench_gpt_switches() {
  run_bench train-gpt --layers 12 --d-model 768 --heads 12 --context 1024 --vocab 50304 --batch 8 \
    --warmup 3 --steps 6 --switches-only --scratch "$work/bench"
}
# `topspin plan memory` against the caching allocator's peak of the real
# GPT step on the GPU (fp32 and bf16 autocast, GPT of width 1024).
stage_bench_plan_memory() {
  run_bench plan --memory-only --scratch "$work/bench"
}
stage_bench_pipeline() {
  run_bench pipeline --queries 2000 --threads 4 --peer-workers 0 --lm-tokens 1048576 \
    --seq-len 256 --scratch "$work/bench"
}

# ---- run ---------------------------------------------------------------------

say "results in $OUT; budget ${budget} s; stages: $stages${skip:+ except $skip}"
#     name                cap  min (seconds)
stage env                  60    5
stage unpack               60    5
stage configure           150   30
stage build               300   30
export LD_LIBRARY_PATH=$run_library_path
stage version              20    3
stage test-cuda            90   10
stage train-data           40   10
stage train-gpu            60   15
stage train-cpu            60   15
stage train-compare        15    2
stage bench-train-gpt     150   40
stage bench-tune-batch     90   30
stage bench-train-ranker   60   20
stage bench-pipeline       50   20
stage bench-plan-memory    40   10
stage bench-gpt-switches  150   60
stage build-rest          200   30
stage test                100   20

# Keep what comes back small: long logs keep their head and tail.
for f in "$OUT"/*.log; do
  [ -f "$f" ] || continue
  if [ "$(stat -c %s "$f")" -gt 4194304 ]; then
    { head -c 1048576 "$f"; printf '\n[... gpu-check.sh cut the middle ...]\n'; tail -c 3145728 "$f"; } >"$f.cut" &&
      mv "$f.cut" "$f"
  fi
done
write_summary
failed=0
for s in "${ran[@]}"; do [ "${st_status[$s]}" != failed ] || failed=$((failed + 1)); done
pack
say "done in $(($(now) - t0)) s: $failed stage(s) failed, ${#incomplete[@]} skipped for lack of time; $OUT/summary.json"
[ "$failed" -eq 0 ] && [ ${#incomplete[@]} -eq 0 ]
