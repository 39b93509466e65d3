#!/usr/bin/env bash
# Installs everything topspin needs to build and test on Debian 12: Debian
# packages (apt-get) and, in the project's virtualenv .venv/, LibTorch as the
# pinned torch wheel (CUDA 13 build; it runs on the CPU when no GPU is there).
#
#   scripts/install-deps.sh           # build + test dependencies
#   scripts/install-deps.sh --bench   # also the peers benchmarks compare against (pip, .venv)
#   scripts/install-deps.sh --dev     # also clang-format and clang-tidy (make format, make tidy)
#   scripts/install-deps.sh --fuzz    # also clang and libFuzzer (make asan runs the fuzzers)
#   scripts/install-deps.sh --check   # exit 0 when everything is installed, 1 when not
#
# Idempotent: what is installed is skipped. Runs apt-get as root, or through
# sudo when not root. Prints what it installs. TOPSPIN_VENV moves the venv.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${TOPSPIN_VENV:-$root/.venv}"

# The torch wheel of the GPU machines (torch 2.11.0+cu130): what is compiled
# and tested here is what runs there.
torch_pin="torch==2.11.0"
# The wheel's CMake config needs nvcc; without a system CUDA toolkit, NVIDIA's
# nvcc wheels of the CUDA the wheel was built with (13.0: what torch's
# cuda-toolkit==13.0.2 pins) go into the venv. Unpinned, pip would pick 13.5.
nvcc_pins=(nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88
           nvidia-cuda-cccl==13.0.85)
# The test that reads topspin's TensorBoard event files with TensorBoard's
# own reader (src/perf/metrics_sink_test.cc), and the one that checks the
# gpt2:DIR tokenizer against Hugging Face's (tests/bpe_vs_hf.py), and
# GPT-2 import/export against transformers (tests/gpt2_transformers_test.py),
# pinned to the versions those tests were written against.
# pyarrow: its wheel ships the Arrow C++ headers and libraries Parquet import
# (src/parquet/) builds against. pyspark: scripts/spark/convert.py and its
# local-mode test (tests/spark_convert_test.sh), on Java 17 from Debian.
test_pips=(tensorboard tokenizers==0.23.3 transformers==5.24.0 safetensors==0.8.0 pyarrow==26.0.1
           pyspark==4.3.0)
# Peers measured by `topspin bench` in the same run, on the same torch.
bench_pips=(numpy pandas scipy==1.17.1 xgboost==3.2.0 lightgbm==4.7.0)

# Build toolchain and libraries. The torch wheel ships the c10d headers but
# not the Gloo headers ProcessGroupGloo.hpp includes: libgloo-dev has them.
build_packages=(
  g++ cmake ninja-build pkg-config make git ca-certificates python3 python3-venv
  libgloo-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libzstd-dev libxxhash-dev libsentencepiece-dev
  libpcre2-dev  # the gpt2:DIR tokenizer's pre-tokenization pattern
  libgtest-dev libgmock-dev libbenchmark-dev
  iproute2  # tests/cli_test.sh: the two-host test in network namespaces
  procps  # tests/cli_test.sh: pgrep, to check that no rank is left behind
  chromium-headless-shell  # tests/report_chromium_test.sh: `topspin report`'s page in a browser
  openjdk-17-jre-headless  # pyspark's JVM: scripts/spark/convert.py and tests/spark_convert_test.sh
)
# Developer tools.
dev_packages=(clang-format clang-tidy)
# libFuzzer comes with clang's runtime libraries.
fuzz_packages=(clang libclang-rt-14-dev)

check_only=0
bench=0
packages=("${build_packages[@]}")
for arg in "$@"; do
  case "$arg" in
    --bench) bench=1 ;;
    --dev) packages+=("${dev_packages[@]}") ;;
    --fuzz) packages+=("${fuzz_packages[@]}") ;;
    --check) check_only=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

have_nvcc() { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; }

# What the venv lacks, as pip requirements.
venv_missing() {
  local want=("$torch_pin" "${test_pips[@]}")
  have_nvcc || want+=("${nvcc_pins[@]}")
  [ $bench -eq 0 ] || want+=("${bench_pips[@]}")
  if [ ! -x "$venv/bin/python" ]; then
    printf '%s\n' "${want[@]}"
    return
  fi
  "$venv/bin/python" - "${want[@]}" <<'PY'
import sys
from importlib import metadata
for req in sys.argv[1:]:
    name, _, version = req.partition("==")
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        print(req)
        continue
    if version and have.split("+")[0] != version:
        print(req)
PY
}

# The wheels' CUDA tree (site-packages/nvidia/cu13) as a toolkit root for
# nvcc and CMake's FindCUDA: nvcc.profile links from lib64, FindCUDA and
# torch's config look for unversioned libcudart.so and libnvrtc.so.
cuda_links() {
  local cu
  cu=$(ls -d "$venv"/lib/python3*/site-packages/nvidia/cu13 2>/dev/null | head -1)
  [ -n "$cu" ] || return 0
  echo "$cu/lib64 lib"
  echo "$cu/lib/libcudart.so libcudart.so.13"
  echo "$cu/lib/libnvrtc.so libnvrtc.so.13"
}
links_missing() {
  have_nvcc && return 0
  local link target
  while read -r link target; do
    [ -e "$link" ] || echo "$link"
  done < <(cuda_links)
}
make_links() {
  have_nvcc && return 0
  local link target
  while read -r link target; do ln -sfn "$target" "$link"; done < <(cuda_links)
}

# pyspark's driver binds to "localhost" (scripts/spark/convert.py and its
# test); a bare container or chroot may have no /etc/hosts to resolve it.
localhost_missing() { ! getent hosts localhost >/dev/null 2>&1; }
hosts=()
localhost_missing && hosts=("127.0.0.1 localhost")

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
pips=()
links=()
if [ ${#missing[@]} -eq 0 ]; then
  mapfile -t pips < <(venv_missing)
  mapfile -t links < <(links_missing)
fi

if [ ${#missing[@]} -eq 0 ] && [ ${#pips[@]} -eq 0 ] && [ ${#links[@]} -eq 0 ] && [ ${#hosts[@]} -eq 0 ]; then
  [ $check_only -eq 1 ] || echo "install-deps.sh: all ${#packages[@]} packages and the venv ($venv) are in place"
  exit 0
fi
if [ $check_only -eq 1 ]; then
  [ ${#missing[@]} -eq 0 ] || echo "install-deps.sh: missing Debian packages: ${missing[*]}" >&2
  [ ${#pips[@]} -eq 0 ] || echo "install-deps.sh: missing in $venv: ${pips[*]}" >&2
  [ ${#links[@]} -eq 0 ] || echo "install-deps.sh: missing CUDA links: ${links[*]}" >&2
  [ ${#hosts[@]} -eq 0 ] || echo "install-deps.sh: \"localhost\" does not resolve (no /etc/hosts entry)" >&2
  exit 1
fi

sudo_cmd=()
if [ ${#missing[@]} -gt 0 ] || [ ${#hosts[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo_cmd=(sudo)
    else
      echo "install-deps.sh: need root or sudo to install: ${missing[*]} ${hosts[*]}" >&2
      exit 1
    fi
  fi
fi

if [ ${#hosts[@]} -gt 0 ]; then
  echo "install-deps.sh: \"localhost\" does not resolve; adding '${hosts[0]}' to /etc/hosts"
  echo "${hosts[0]}" | "${sudo_cmd[@]}" tee -a /etc/hosts >/dev/null
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps.sh: installing ${#missing[@]} Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
  mapfile -t pips < <(venv_missing)
fi

if [ ${#pips[@]} -gt 0 ]; then
  # Debian's interpreter, not whatever python3 is first on PATH.
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  echo "install-deps.sh: pip installing into $venv: ${pips[*]} (the torch wheel and its CUDA libraries are ~4.5 GB)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-input "${pips[@]}"
fi
make_links
echo "install-deps.sh: done"
