// Batches and the fixed pool their buffers come from.
//
// Shapes (B: lists or sequences in this rank's batch, N: documents, i.e.
// the sum of list lengths, F: dense features, C: sparse ids, T: sequence
// length):
//   ranking  dense   [N, F] float32, row-major
//            sparse  [N, C] int64
//            labels  [N]    float32
//            offsets [B + 1] int64, offsets[0] == 0, list i is rows
//                    [offsets[i], offsets[i + 1]) (jagged: no padding)
//   language tokens  [B, T + 1] int32 (inputs are [:, :T], targets [:, 1:])
// Every array starts on a 64-byte boundary. A pool allocates
// `capacity` batches once, each sized for the largest batch the layout
// allows; the consumer holds a batch through a BatchPtr and the buffer goes
// back to the pool when the BatchPtr is destroyed.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace topspin {

// Where batch memory comes from; the trainer passes a pinned (page-locked)
// allocator on CUDA machines. Allocate returns 64-byte-aligned memory or
// throws std::bad_alloc. Must be thread-safe.
class BufferAllocator {
 public:
  virtual ~BufferAllocator() = default;
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* p, size_t bytes) = 0;
  virtual const char* name() const = 0;
};
// Ordinary 64-byte-aligned host memory.
std::shared_ptr<BufferAllocator> HostAllocator();

enum class BatchKind { kRanking, kLanguageModel };

// The capacities every batch of a pipeline is allocated with.
struct BatchLayout {
  BatchKind kind = BatchKind::kRanking;
  size_t max_lists = 0;   // B (ranking lists or LM sequences)
  size_t max_docs = 0;    // ranking: B * the longest list
  size_t dense_dim = 0;   // F
  size_t sparse_dim = 0;  // C
  size_t seq_len = 0;     // T
  size_t Bytes() const;   // one batch, all arrays, with alignment
};

class Batch {
 public:
  Batch(const BatchLayout& layout, std::byte* memory);

  const BatchLayout& layout() const { return layout_; }
  // Set by the producer.
  uint64_t epoch = 0;
  uint64_t index = 0;    // global batch index within the epoch
  size_t num_lists = 0;  // B of this batch (<= layout().max_lists; 0 is possible at an epoch's
                         // end without drop_last)
  size_t num_docs = 0;   // N (ranking)

  // Views sized by num_lists / num_docs; arrays of the other kind are empty.
  std::span<float> dense() { return {dense_, dense_ ? num_docs * layout_.dense_dim : 0}; }
  std::span<int64_t> sparse() { return {sparse_, sparse_ ? num_docs * layout_.sparse_dim : 0}; }
  std::span<float> labels() { return {labels_, labels_ ? num_docs : 0}; }
  std::span<int64_t> offsets() { return {offsets_, offsets_ ? num_lists + 1 : 0}; }
  std::span<int32_t> tokens() { return {tokens_, tokens_ ? num_lists * (layout_.seq_len + 1) : 0}; }
  std::span<const float> dense() const {
    return {dense_, dense_ ? num_docs * layout_.dense_dim : 0};
  }
  std::span<const int64_t> sparse() const {
    return {sparse_, sparse_ ? num_docs * layout_.sparse_dim : 0};
  }
  std::span<const float> labels() const { return {labels_, labels_ ? num_docs : 0}; }
  std::span<const int64_t> offsets() const { return {offsets_, offsets_ ? num_lists + 1 : 0}; }
  std::span<const int32_t> tokens() const {
    return {tokens_, tokens_ ? num_lists * (layout_.seq_len + 1) : 0};
  }
  // Raw pointers at full capacity, for the producer.
  float* dense_data() { return dense_; }
  int64_t* sparse_data() { return sparse_; }
  float* labels_data() { return labels_; }
  int64_t* offsets_data() { return offsets_; }
  int32_t* tokens_data() { return tokens_; }
  // Bytes of the filled arrays (what a host-to-device copy moves).
  size_t FilledBytes() const;

  // Points the arrays of `layout` into `memory` (nullptr: only measures);
  // returns the bytes they take, each array 64-byte aligned.
  static size_t LayOut(const BatchLayout& layout, std::byte* memory, Batch* batch);

 private:
  BatchLayout layout_;
  float* dense_ = nullptr;
  int64_t* sparse_ = nullptr;
  float* labels_ = nullptr;
  int64_t* offsets_ = nullptr;
  int32_t* tokens_ = nullptr;
};

class BatchPool;
struct BatchReturn {
  std::shared_ptr<BatchPool> pool;
  void operator()(Batch* batch) const;
};
// A batch on loan from its pool.
using BatchPtr = std::unique_ptr<Batch, BatchReturn>;

// `capacity` batches allocated up front. Thread-safe. Lives as long as
// its longest-held BatchPtr (they share ownership).
class BatchPool : public std::enable_shared_from_this<BatchPool> {
 public:
  static std::shared_ptr<BatchPool> Create(const BatchLayout& layout, size_t capacity,
                                           std::shared_ptr<BufferAllocator> allocator);
  ~BatchPool();
  BatchPool(const BatchPool&) = delete;
  BatchPool& operator=(const BatchPool&) = delete;

  // A free batch, or nullptr when all are on loan (never blocks).
  BatchPtr TryAcquire();
  size_t capacity() const { return batches_.size(); }
  size_t free() const;
  const char* allocator_name() const { return allocator_->name(); }
  // Called (without the pool's lock) after every return: the pipeline
  // wakes its workers with it. Set before use, cleared before shutdown.
  void SetOnReturn(std::function<void()> fn);

 private:
  BatchPool(const BatchLayout& layout, size_t capacity, std::shared_ptr<BufferAllocator> a);
  void Return(Batch* batch);
  friend struct BatchReturn;

  std::shared_ptr<BufferAllocator> allocator_;
  size_t bytes_per_batch_;
  std::vector<std::byte*> memory_;
  std::vector<std::unique_ptr<Batch>> batches_;
  mutable std::mutex mu_;
  std::vector<Batch*> free_;         // guarded by mu_
  std::function<void()> on_return_;  // guarded by mu_
};

}  // namespace topspin
