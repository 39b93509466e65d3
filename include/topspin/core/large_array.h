// LargeArray<T>: an owned, uninitialised array for big, long-lived data
// (transformed row groups): no zero-fill, unlike std::vector's resize.
//
// Arrays of 2 MiB or more are mapped and populated in one call
// (MADV_POPULATE_WRITE): the kernel still zeroes each new page, but
// without a fault per 4 KiB page, about 1.4x faster on this project's VMs;
// munmap gives them back at once. They are not advised as transparent huge
// pages: where the kernel's THP defrag policy is "madvise" (the Debian
// default) a fault on such a region compacts memory synchronously, and on
// these VMs that stalled a loader for 20 to 40 ms per 8 MiB unit
// (docs/BENCHMARKS.md, "pipeline"). Smaller arrays are 64-byte aligned
// heap memory. T must be trivially copyable; elements start
// uninitialised. Move-only.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

namespace topspin {

namespace large_array_internal {
void* Allocate(size_t bytes);  // throws std::bad_alloc
void Free(void* p, size_t bytes);
}  // namespace large_array_internal

// Asks the kernel to back the whole pages inside [p, p + bytes) with
// memory now, in one call (MADV_POPULATE_WRITE), instead of a fault per
// 4 KiB page on first touch: for new heap buffers about to be filled.
// Advice only; ranges under 64 KiB are left alone.
void PopulateForWrite(void* p, size_t bytes);

template <typename T>
class LargeArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  LargeArray() = default;
  explicit LargeArray(size_t size)
      : data_(size == 0 ? nullptr
                        : static_cast<T*>(large_array_internal::Allocate(size * sizeof(T)))),
        size_(size) {}
  ~LargeArray() { large_array_internal::Free(data_, size_ * sizeof(T)); }
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
