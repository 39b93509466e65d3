#include "topspin/core/sha256.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <fmt/format.h>

#include "topspin/core/files.h"

namespace topspin {
namespace {

// FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of
// the cube roots of the first 64 primes.
constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// Section 5.3.3: the initial hash value.
constexpr std::array<uint32_t, 8> kInitialState = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

constexpr uint32_t Rotr(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

uint32_t LoadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// The message schedule W[0..63] of one block (section 6.2.2, step 1).
std::array<uint32_t, 64> MessageSchedule(const uint8_t* block) {
  std::array<uint32_t, 64> w;
  for (int t = 0; t < 16; ++t) w[t] = LoadBigEndian32(block + 4 * t);
  for (int t = 16; t < 64; ++t) {
    const uint32_t s0 = Rotr(w[t - 15], 7) ^ Rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const uint32_t s1 = Rotr(w[t - 2], 17) ^ Rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  return w;
}

// One block by the portable code (section 6.2.2, steps 2-4).
void CompressPortable(std::array<uint32_t, 8>& state, const uint8_t* block) {
  const std::array<uint32_t, 64> w = MessageSchedule(block);
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int t = 0; t < 64; ++t) {
    const uint32_t s1 = Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25);
    const uint32_t ch = (e & f) ^ (~e & g);
    const uint32_t t1 = h + s1 + ch + kRoundConstants[t] + w[t];
    const uint32_t s0 = Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22);
    const uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    const uint32_t t2 = s0 + maj;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  const uint32_t out[8] = {a, b, c, d, e, f, g, h};
  for (int i = 0; i < 8; ++i) state[i] += out[i];
}

#if defined(__x86_64__)
bool DetectShaExtensions() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool sse41 = (ecx & bit_SSE4_1) != 0, ssse3 = (ecx & bit_SSSE3) != 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  return sse41 && ssse3 && (ebx & bit_SHA) != 0;
}

// `count` blocks with the SHA extensions. The state lives in two registers
// as the instructions want it: {a, b, e, f} and {c, d, g, h} (each listed
// from the top lane down). Every sha256rnds2 does two rounds; the message
// schedule W[t..t+3] for t >= 16 comes from sha256msg1 (the sigma0 terms),
// W[t-7..t-4] and sha256msg2 (the sigma1 terms), four words at a time.
__attribute__((target("sha,sse4.1,ssse3"))) void CompressShaNi(std::array<uint32_t, 8>& state,
                                                               const uint8_t* blocks,
                                                               size_t count) {
  // Byte swap of each 32-bit word: the message is big-endian.
  const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i abcd = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[0]));
  __m128i efgh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[4]));
  abcd = _mm_shuffle_epi32(abcd, 0xB1);         // lanes b a d c
  efgh = _mm_shuffle_epi32(efgh, 0x1B);         // lanes h g f e
  __m128i abef = _mm_alignr_epi8(abcd, efgh, 8);  // lanes f e b a
  __m128i cdgh = _mm_blend_epi16(efgh, abcd, 0xF0);  // lanes h g d c
  for (size_t n = 0; n < count; ++n, blocks += 64) {
    const __m128i saved_abef = abef, saved_cdgh = cdgh;
    __m128i w[4];  // W of the last four groups of four rounds, ring-indexed
    for (int i = 0; i < 16; ++i) {
      __m128i words;
      if (i < 4) {
        words = _mm_shuffle_epi8(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks + 16 * i)), swap);
      } else {
        const __m128i& w16 = w[i % 4];  // W[t-16..t-13]
        const __m128i& w12 = w[(i + 1) % 4];
        const __m128i& w8 = w[(i + 2) % 4];
        const __m128i& w4 = w[(i + 3) % 4];  // W[t-4..t-1]
        words = _mm_sha256msg1_epu32(w16, w12);
        words = _mm_add_epi32(words, _mm_alignr_epi8(w4, w8, 4));  // + W[t-7..t-4]
        words = _mm_sha256msg2_epu32(words, w4);
      }
      w[i % 4] = words;
      __m128i wk = _mm_add_epi32(
          words, _mm_loadu_si128(reinterpret_cast<const __m128i*>(&kRoundConstants[4 * i])));
      // Rounds 4i and 4i+1 leave the new {a, b, e, f} in `cdgh`, whose old
      // {a, b, e, f} is the new {c, d, g, h}; rounds 4i+2 and 4i+3 swap the
      // roles back, so after each four the names are right again.
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
      wk = _mm_shuffle_epi32(wk, 0x0E);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, wk);
    }
    abef = _mm_add_epi32(abef, saved_abef);
    cdgh = _mm_add_epi32(cdgh, saved_cdgh);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);  // lanes a b e f
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);  // lanes g h c d
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[0]), _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[4]), _mm_alignr_epi8(dchg, feba, 8));
}
#endif

}  // namespace

bool Sha256::HasHardware() {
#if defined(__x86_64__)
  static const bool has = DetectShaExtensions();
  return has;
#else
  return false;
#endif
}

Sha256::Sha256(bool portable) : hardware_(!portable && HasHardware()) {
  Reset();
}

void Sha256::Reset() {
  state_ = kInitialState;
  buffered_ = 0;
  total_bytes_ = 0;
}

void Sha256::CompressBlocks(const uint8_t* blocks, size_t count) {
#if defined(__x86_64__)
  if (hardware_) {
    CompressShaNi(state_, blocks, count);
    return;
  }
#endif
  for (size_t n = 0; n < count; ++n) CompressPortable(state_, blocks + 64 * n);
}

void Sha256::Update(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_bytes_ += size;
  if (buffered_ > 0) {
    const size_t take = std::min(size, buffer_.size() - buffered_);
    std::memcpy(buffer_.data() + buffered_, p, take);
    buffered_ += take;
    p += take;
    size -= take;
    if (buffered_ < buffer_.size()) return;
    CompressBlocks(buffer_.data(), 1);
    buffered_ = 0;
  }
  CompressBlocks(p, size / 64);
  p += size / 64 * 64;
  size %= 64;
  if (size > 0) std::memcpy(buffer_.data(), p, size);
  buffered_ = size;
}

std::string Sha256::HexDigest() {
  // Section 5.1.1: a 1 bit, zeros up to 56 mod 64 bytes, the bit length
  // as a big-endian 64-bit integer.
  const uint64_t bit_length = total_bytes_ * 8;
  const uint8_t one = 0x80;
  Update(&one, 1);
  const uint8_t zeros[64] = {};
  Update(zeros, (buffered_ <= 56 ? 56 : 120) - buffered_);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(bit_length >> (56 - 8 * i));
  Update(length, sizeof(length));
  std::string hex;
  hex.reserve(64);
  for (uint32_t word : state_) fmt::format_to(std::back_inserter(hex), "{:08x}", word);
  Reset();
  return hex;
}

std::string Sha256Hex(const void* data, size_t size) {
  Sha256 sha;
  sha.Update(data, size);
  return sha.HexDigest();
}

std::string Sha256Hex(std::string_view s) {
  return Sha256Hex(s.data(), s.size());
}

std::string Sha256File(const std::filesystem::path& path) {
  const MmapFile file(path);
  // Hash in slices so a huge map is paged in sequentially.
  constexpr size_t kSlice = size_t{8} << 20;
  Sha256 sha;
  for (size_t at = 0; at < file.size(); at += kSlice) {
    sha.Update(file.data() + at, std::min(kSlice, file.size() - at));
  }
  return sha.HexDigest();
}

}  // namespace topspin
