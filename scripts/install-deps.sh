#!/usr/bin/env bash
# Installs every Debian 12 package topspin needs to build and test.
#
#   scripts/install-deps.sh           # build + test dependencies
#   scripts/install-deps.sh --bench   # also the peers benchmarks compare against
#   scripts/install-deps.sh --dev     # also clang-format and clang-tidy (make format, make tidy)
#   scripts/install-deps.sh --fuzz    # also clang and libFuzzer (make asan runs the fuzzers)
#   scripts/install-deps.sh --check   # exit 0 when everything is installed, 1 when not
#
# Idempotent: packages already installed are skipped. Runs apt-get as root,
# or through sudo when not root. Prints what it installs.
set -euo pipefail

# Build toolchain and libraries. libopenblas0-pthread matters: without it
# Debian's LibTorch multiplies matrices ~14x slower.
build_packages=(
  g++ cmake ninja-build pkg-config make git ca-certificates
  libtorch-dev libgloo-dev libopenblas0-pthread
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libzstd-dev libxxhash-dev libsentencepiece-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  iproute2  # tests/cli_test.sh: the two-host test in network namespaces
  chromium-headless-shell  # tests/report_chromium_test.sh: `topspin report`'s page in a browser
  python3-torch  # tests/cli_test.sh: a job launched by torchrun (torch.distributed.run)
)
# Peers measured by `topspin bench` in the same run.
bench_packages=(python3 python3-torch python3-numpy python3-pandas python3-xgboost)
# Developer tools.
dev_packages=(clang-format clang-tidy)
# libFuzzer comes with clang's runtime libraries.
fuzz_packages=(clang libclang-rt-14-dev)

check_only=0
packages=("${build_packages[@]}")
for arg in "$@"; do
  case "$arg" in
    --bench) packages+=("${bench_packages[@]}") ;;
    --dev) packages+=("${dev_packages[@]}") ;;
    --fuzz) packages+=("${fuzz_packages[@]}") ;;
    --check) check_only=1 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  [ $check_only -eq 1 ] || echo "install-deps.sh: all ${#packages[@]} packages already installed"
  exit 0
fi
if [ $check_only -eq 1 ]; then
  echo "install-deps.sh: missing: ${missing[*]}" >&2
  exit 1
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo_cmd=(sudo)
  else
    echo "install-deps.sh: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "install-deps.sh: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps.sh: done"
