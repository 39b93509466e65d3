// LargeArray<T>: an owned, uninitialised array for big, long-lived data
// (transformed row groups): no zero-fill, unlike std::vector's resize.
//
// Arrays of 2 MiB or more are 2 MiB-aligned and advised as transparent huge
// pages (madvise MADV_HUGEPAGE), so that where the kernel grants them first
// touch costs one page fault per 2 MiB instead of one per 4 KiB. On this
// project's VMs (THP "madvise") that did not measurably help
// (docs/BENCHMARKS.md, "pipeline"); the advice is harmless elsewhere.
// Smaller arrays are 64-byte aligned. T must be trivially copyable;
// elements start uninitialised. Move-only.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

namespace topspin {

namespace large_array_internal {
void* Allocate(size_t bytes);  // throws std::bad_alloc
void Free(void* p);
}  // namespace large_array_internal

template <typename T>
class LargeArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  LargeArray() = default;
  explicit LargeArray(size_t size)
      : data_(size == 0 ? nullptr
                        : static_cast<T*>(large_array_internal::Allocate(size * sizeof(T)))),
        size_(size) {}
  ~LargeArray() { large_array_internal::Free(data_); }
  LargeArray(LargeArray&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  LargeArray& operator=(LargeArray&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  LargeArray(const LargeArray&) = delete;
  LargeArray& operator=(const LargeArray&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t size_bytes() const { return size_ * sizeof(T); }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  std::span<T> span() { return {data_, size_}; }
  std::span<const T> span() const { return {data_, size_}; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace topspin
