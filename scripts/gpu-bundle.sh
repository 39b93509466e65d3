#!/usr/bin/env bash
# Downloads (apt-get download; nothing is installed) the Debian 12 packages a
# bare GPU image lacks to build and test topspin: the -dev packages that
# cmake/TopspinDeps.cmake finds, their runtime libraries, the Gloo headers
# and pkgconf. They land in gpu-bundle/ (ignored by git) with MANIFEST.tsv
# (package, version, architecture, bytes, sha256, file). scripts/gpu-check.sh
# unpacks them on the GPU machine. docs/GPU.md says how the two fit together.
#
#   scripts/gpu-bundle.sh               # fill gpu-bundle/ (idempotent)
#   scripts/gpu-bundle.sh --out DIR     # somewhere else
#   scripts/gpu-bundle.sh --check       # exit 0 when gpu-bundle/ is complete and current
#
# Runs on Debian 12 (bookworm) with apt lists present (apt-get update once).
# Fails when the bundle would exceed 40 MiB (the device tool carries 64 MiB).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/gpu-bundle"
check_only=0
limit_bytes=$((40 * 1024 * 1024))

# What topspin's CMake finds (find_package, find_path/find_library, pkg-config)
# and what the built binaries load at run time.
dev_packages=(
  libfmt-dev libspdlog-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libzstd-dev libxxhash-dev libsentencepiece-dev
  libpcre2-dev  # the gpt2:DIR tokenizer's pattern (libpcre2-8; -dev pulls in all widths)
  libgloo-dev  # headers only: ProcessGroupGloo.hpp (in the torch wheel) includes gloo/*.h
)
runtime_packages=(libfmt9 libspdlog1.10 libyaml-cpp0.7 libzstd1 libxxhash0 libsentencepiece0
                  libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3)
# pkg-config for FindPkgConfig (sentencepiece), used only when the image has none.
tool_packages=(pkgconf pkgconf-bin libpkgconf3)
# Dependencies deliberately left out: the C/C++ runtime comes with the image's
# g++ (libc-dev: libc6-dev, which libpcre2-dev asks for); the rest is not
# needed to build or run topspin (libgloo0: Gloo's code is inside
# libtorch_cpu; catch2/googletest: sources only).
assumed_on_image=(libc6 libgcc-s1 libstdc++6 libc-dev libc6-dev)
not_needed=(libgloo0 libhiredis-dev libibverbs-dev catch2 googletest)

while [ $# -gt 0 ]; do
  case "$1" in
    --check) check_only=1 ;;
    --out) [ $# -ge 2 ] || { echo "gpu-bundle.sh: --out needs a directory" >&2; exit 2; }
           out=$2; shift ;;
    --out=*) out=${1#--out=} ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "gpu-bundle.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "gpu-bundle.sh: $*" >&2; exit 1; }

# shellcheck disable=SC1091
. /etc/os-release
[[ "${ID:-}" = debian && "${VERSION_ID:-}" = 12 ]] ||
  die "needs Debian 12 (bookworm) to fetch bookworm packages; this is ${PRETTY_NAME:-unknown}"
for tool in apt-get apt-cache dpkg-deb strings sha256sum; do
  command -v "$tool" >/dev/null || die "$tool is needed"
done

packages=("${dev_packages[@]}" "${runtime_packages[@]}" "${tool_packages[@]}")
arch=$(dpkg --print-architecture)

# Candidate version, file name, SHA256 and dependencies of every package, from
# the apt lists in one apt-cache call (each call takes seconds).
declare -A version file sha depends
records=$(apt-cache show --no-all-versions "${packages[@]}" 2>/dev/null | awk '
  /^Package: /     { p = $2 }
  /^Version: /     { v = $2 }
  /^Filename: /    { n = split($2, a, "/"); f = a[n] }
  /^SHA256: /      { h = $2 }
  /^(Pre-)?Depends: / { sub(/^(Pre-)?Depends: /, ""); d = d (d == "" ? "" : ", ") $0 }
  /^$/ { if (p != "") print p "\t" v "\t" f "\t" h "\t" d; p = v = f = h = d = "" }
  END  { if (p != "") print p "\t" v "\t" f "\t" h "\t" d }') || true
while IFS=$'\t' read -r p v f h d; do
  [ -n "$p" ] || continue
  version[$p]=$v file[$p]=$f sha[$p]=$h depends[$p]=$d
done <<<"$records"
for p in "${packages[@]}"; do
  [[ -n "${version[$p]:-}" && -n "${file[$p]:-}" && -n "${sha[$p]:-}" ]] ||
    die "apt-cache knows no package '$p' with Version/Filename/SHA256 (run 'apt-get update' first?)"
done

# Every dependency of a bundled package is bundled, assumed or known unneeded:
# a new Debian point release that adds one fails here, not on the GPU machine.
declare -A accounted
for p in "${packages[@]}" "${assumed_on_image[@]}" "${not_needed[@]}"; do accounted[$p]=1; done
for p in "${packages[@]}"; do
  while read -r alt; do
    [ -n "$alt" ] || continue
    ok=0
    for d in $(tr '|' '\n' <<<"$alt" | sed 's/(.*)//; s/:any//'); do
      [ -n "${accounted[$d]:-}" ] && ok=1
    done
    [ $ok -eq 1 ] || die "$p depends on '$alt', which is neither bundled nor listed as assumed/not needed; add it to $0"
  done < <(tr ',' '\n' <<<"${depends[$p]}")
done

if [ $check_only -eq 1 ]; then
  for p in "${packages[@]}"; do
    f="$out/${file[$p]}"
    [ -f "$f" ] || { echo "gpu-bundle.sh: missing ${file[$p]}" >&2; exit 1; }
    [ "$(sha256sum "$f" | cut -d' ' -f1)" = "${sha[$p]}" ] || { echo "gpu-bundle.sh: stale $f" >&2; exit 1; }
  done
  [ -f "$out/MANIFEST.tsv" ] || { echo "gpu-bundle.sh: no MANIFEST.tsv" >&2; exit 1; }
  echo "gpu-bundle.sh: $out is complete (${#packages[@]} packages)"
  exit 0
fi

mkdir -p "$out"
apt_opts=()
# As root, apt drops to _apt, which cannot write to most directories.
[ "$(id -u)" -ne 0 ] || apt_opts=(-o APT::Sandbox::User=root)

fetched=0
for p in "${packages[@]}"; do
  f="$out/${file[$p]}"
  if [ -f "$f" ] && [ "$(sha256sum "$f" | cut -d' ' -f1)" = "${sha[$p]}" ]; then
    continue
  fi
  rm -f "$f"
  # apt names the file after the version with its epoch (1%3a1.10.0...); the
  # bundle uses the archive's own file name.
  rm -rf "$out/.download" && mkdir -p "$out/.download"
  (cd "$out/.download" && apt-get download -q "${apt_opts[@]}" "$p=${version[$p]}") ||
    die "apt-get download $p=${version[$p]} failed"
  got=("$out"/.download/*.deb)
  [[ ${#got[@]} -eq 1 && -f "${got[0]}" ]] || die "apt-get download $p wrote no single .deb"
  mv "${got[0]}" "$f"
  rm -rf "$out/.download"
  [ "$(sha256sum "$f" | cut -d' ' -f1)" = "${sha[$p]}" ] || die "$f: SHA256 differs from the apt lists"
  fetched=$((fetched + 1))
done

# Remove .deb files that are no longer part of the bundle (older versions).
declare -A wanted
for p in "${packages[@]}"; do wanted[${file[$p]}]=1; done
for f in "$out"/*.deb; do
  [ -e "$f" ] || continue
  [ -n "${wanted[$(basename "$f")]:-}" ] || { echo "gpu-bundle.sh: removing stale $(basename "$f")"; rm -f "$f"; }
done

# The newest glibc / libstdc++ symbol versions the bundled binaries need:
# gpu-check.sh compares them with the image's before it builds.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for p in "${runtime_packages[@]}" "${tool_packages[@]}"; do dpkg-deb -x "$out/${file[$p]}" "$tmp/x"; done
max_version() {  # max_version PREFIX: the highest PREFIX_x.y.z referenced by the bundle's ELF files
  find "$tmp/x" -type f \( -name '*.so*' -o -path '*/bin/*' \) -print0 |
    xargs -0 strings -a 2>/dev/null | grep -oE "^$1_[0-9]+(\.[0-9]+)*$" | sort -uV | tail -1
}
need_glibc=$(max_version GLIBC)
need_glibcxx=$(max_version GLIBCXX)
need_cxxabi=$(max_version CXXABI)

total=0
{
  printf '# topspin GPU bundle: Debian %s (%s) packages for scripts/gpu-check.sh\n' "$VERSION_ID" "$VERSION_CODENAME"
  printf '# created %s by scripts/gpu-bundle.sh\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  printf '# needs-glibc\t%s\n# needs-glibcxx\t%s\n# needs-cxxabi\t%s\n' "$need_glibc" "$need_glibcxx" "$need_cxxabi"
  printf 'package\tversion\tarchitecture\tbytes\tsha256\tfile\n'
  for p in "${packages[@]}"; do
    f="$out/${file[$p]}"
    bytes=$(stat -c %s "$f")
    total=$((total + bytes))
    a=$(dpkg-deb -f "$f" Architecture)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$p" "${version[$p]}" "$a" "$bytes" "${sha[$p]}" "${file[$p]}"
  done
} >"$out/MANIFEST.tsv.tmp"
# Same packages, same manifest: the creation time changes only with the content.
if [ -f "$out/MANIFEST.tsv" ] &&
   cmp -s <(grep -v '^# created' "$out/MANIFEST.tsv") <(grep -v '^# created' "$out/MANIFEST.tsv.tmp"); then
  rm -f "$out/MANIFEST.tsv.tmp"
else
  mv "$out/MANIFEST.tsv.tmp" "$out/MANIFEST.tsv"
fi

size=$(du -sb "$out" | cut -f1)
if [ "$size" -gt "$limit_bytes" ]; then
  die "$out is $size bytes, over the 40 MiB limit ($limit_bytes); the device tool carries 64 MiB in all"
fi
echo "gpu-bundle.sh: $out: ${#packages[@]} packages ($arch), $fetched fetched now," \
  "$(awk -v b="$total" 'BEGIN{printf "%.2f MiB of .deb", b/1048576}'), $size bytes on disk;" \
  "needs $need_glibc, $need_glibcxx"
echo "gpu-bundle.sh: carry it to the device: run(carry=[\"gpu-bundle\"], command=\"bash scripts/gpu-check.sh\")"
