#include "topspin/pipeline/batch.h"

#include <cstdlib>
#include <new>

#include "topspin/core/error.h"

namespace topspin {
namespace {

constexpr size_t kAlign = 64;

size_t Aligned(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

class HostBufferAllocator final : public BufferAllocator {
 public:
  void* Allocate(size_t bytes) override {
    void* p = nullptr;
    if (posix_memalign(&p, kAlign, bytes == 0 ? kAlign : bytes) != 0) throw std::bad_alloc();
    return p;
  }
  void Free(void* p, size_t) override { std::free(p); }
  const char* name() const override { return "host"; }
};

// Carves the arrays of one batch out of `memory` (null: just measures).
struct Carve {
  std::byte* at;
  size_t used = 0;
  template <typename T>
  T* Take(size_t count) {
    T* p = at == nullptr ? nullptr : reinterpret_cast<T*>(at + used);
    used += Aligned(count * sizeof(T));
    return p;
  }
};

}  // namespace

std::shared_ptr<BufferAllocator> HostAllocator() {
  static const auto allocator = std::make_shared<HostBufferAllocator>();
  return allocator;
}

size_t BatchLayout::Bytes() const {
  return Batch::LayOut(*this, nullptr, nullptr);
}

size_t Batch::LayOut(const BatchLayout& l, std::byte* memory, Batch* b) {
  Carve c{memory};
  Batch scratch(BatchLayout{}, nullptr);
  Batch& out = b != nullptr ? *b : scratch;
  if (l.kind == BatchKind::kRanking) {
    out.dense_ = c.Take<float>(l.max_docs * l.dense_dim);
    out.sparse_ = c.Take<int64_t>(l.max_docs * l.sparse_dim);
    out.labels_ = c.Take<float>(l.max_docs);
    out.offsets_ = c.Take<int64_t>(l.max_lists + 1);
  } else {
    out.tokens_ = c.Take<int32_t>(l.max_lists * (l.seq_len + 1));
  }
  return c.used;
}

Batch::Batch(const BatchLayout& layout, std::byte* memory) : layout_(layout) {
  if (memory == nullptr) return;
  LayOut(layout, memory, this);
  if (offsets_ != nullptr) offsets_[0] = 0;
}

size_t Batch::FilledBytes() const {
  if (layout_.kind == BatchKind::kLanguageModel) return tokens().size_bytes();
  return dense().size_bytes() + sparse().size_bytes() + labels().size_bytes() +
         offsets().size_bytes();
}

void BatchReturn::operator()(Batch* batch) const {
  if (batch != nullptr) pool->Return(batch);
}

std::shared_ptr<BatchPool> BatchPool::Create(const BatchLayout& layout, size_t capacity,
                                             std::shared_ptr<BufferAllocator> allocator) {
  if (capacity == 0) throw InternalError("BatchPool: capacity 0");
  return std::shared_ptr<BatchPool>(
      new BatchPool(layout, capacity, allocator ? std::move(allocator) : HostAllocator()));
}

BatchPool::BatchPool(const BatchLayout& layout, size_t capacity,
                     std::shared_ptr<BufferAllocator> allocator)
    : allocator_(std::move(allocator)), bytes_per_batch_(layout.Bytes()) {
  for (size_t i = 0; i < capacity; ++i) {
    memory_.push_back(static_cast<std::byte*>(allocator_->Allocate(bytes_per_batch_)));
    batches_.push_back(std::make_unique<Batch>(layout, memory_.back()));
    free_.push_back(batches_.back().get());
  }
}

BatchPool::~BatchPool() {
  for (std::byte* m : memory_) allocator_->Free(m, bytes_per_batch_);
}

BatchPtr BatchPool::TryAcquire() {
  std::lock_guard lock(mu_);
  if (free_.empty()) return BatchPtr(nullptr, BatchReturn{nullptr});
  Batch* b = free_.back();
  free_.pop_back();
  return BatchPtr(b, BatchReturn{shared_from_this()});
}

size_t BatchPool::free() const {
  std::lock_guard lock(mu_);
  return free_.size();
}

void BatchPool::SetOnReturn(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  on_return_ = std::move(fn);
}

void BatchPool::Return(Batch* batch) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mu_);
    free_.push_back(batch);
    notify = on_return_;
  }
  if (notify) notify();
}

}  // namespace topspin
