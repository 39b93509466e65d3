#include "topspin/ddp/zero3.h"

#include <torch/csrc/autograd/function.h>
#include <torch/torch.h>

#include "ddp/grad_hooks.h"
#include "topspin/core/error.h"

namespace topspin {

struct Zero3::Impl {
  struct Unit {
    std::vector<at::Tensor> params;
    std::vector<int64_t> offsets;  // of each parameter in the unit's buffer
    int64_t numel = 0;             // unpadded
    int64_t piece = 0;             // ceil(numel / world): each rank's share
    int64_t shard_offset = 0;      // of this rank's piece in shard_params/grads
    at::Tensor full;               // [piece * world]; its memory only while gathered
    bool gathered = false;
    int ready = 0;                 // parameters whose gradient backward has produced
    bool launched = false;
    at::Tensor staging;            // the full gradient while it is reduced
    std::vector<CommWork> work;
  };

  Comm& comm;
  Options options;
  std::vector<Unit> units;
  at::Tensor shard_params, shard_grads;
  int64_t total = 0, gathered_bytes = 0, peak_gathered_bytes = 0;
  bool armed = false;
  size_t next_harvest = 0;
  std::vector<size_t> order;  // units in the order their reduces started
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;

  Impl(Comm& c, Options o) : comm(c), options(o) {}

  int64_t Bytes(const Unit& u) const { return u.piece * comm.world_size() * int64_t(sizeof(float)); }

  // Drops the memory of the unit's buffer; the storage object (and every
  // view of it, the parameters and what autograd saved) stays.
  void Free(Unit& u) {
    if (!u.gathered) return;
    u.full.storage().unsafeGetStorageImpl()->reset();
    u.gathered = false;
    gathered_bytes -= Bytes(u);
  }

  void Gather(Unit& u) {
    if (u.gathered) return;
    auto* storage = u.full.storage().unsafeGetStorageImpl();
    // The allocator the buffer was made with: host memory, or the CUDA
    // caching allocator when the model lives on a GPU.
    storage->set_data_ptr_noswap(storage->allocator()->allocate(size_t(Bytes(u))));
    storage->set_nbytes(size_t(Bytes(u)));
    u.gathered = true;
    gathered_bytes += Bytes(u);
    peak_gathered_bytes = std::max(peak_gathered_bytes, gathered_bytes);
    std::vector<at::Tensor> out;
    for (int r = 0; r < comm.world_size(); ++r) out.push_back(u.full.narrow(0, r * u.piece, u.piece));
    comm.AllGatherInto(shard_params.narrow(0, u.shard_offset, u.piece), out);
  }

  // The unit's gradients are complete: reduce each piece to its owner and
  // free the full gradients and parameters.
  void Launch(size_t index) {
    Unit& u = units[index];
    u.launched = true;
    u.staging = torch::zeros({u.piece * comm.world_size()}, shard_grads.options());
    for (size_t k = 0; k < u.params.size(); ++k) {
      auto& grad = u.params[k].mutable_grad();
      if (!grad.defined()) continue;  // unused in this backward
      u.staging.narrow(0, u.offsets[k], u.params[k].numel()).copy_(grad.reshape({-1}));
      grad.reset();
    }
    Free(u);
    // One reduce-scatter: rank r's piece of the sum lands in its shard.
    std::vector<at::Tensor> pieces;
    for (int r = 0; r < comm.world_size(); ++r) pieces.push_back(u.staging.narrow(0, r * u.piece, u.piece));
    u.work.push_back(
        comm.ReduceScatterSumAsync(std::move(pieces), shard_grads.narrow(0, u.shard_offset, u.piece)));
    order.push_back(index);
    while (next_harvest + 1 < order.size() && Done(units[order[next_harvest]])) {
      Harvest(units[order[next_harvest++]]);
    }
  }

  static bool Done(const Unit& u) {
    for (const auto& w : u.work) {
      if (!w.Ready()) return false;
    }
    return true;
  }

  void Harvest(Unit& u) {
    for (auto& w : u.work) w.Wait();
    u.work.clear();
    u.staging = at::Tensor();  // the reduce-scatter wrote this rank's piece into shard_grads
  }

  void OnReady(size_t index) {
    if (!armed) return;
    Unit& u = units[index];
    if (++u.ready == int(u.params.size())) Launch(index);
  }
};

Zero3::Zero3(Comm& comm, const std::vector<std::vector<at::Tensor>>& units, Options options)
    : impl_(std::make_unique<Impl>(comm, options)) {
  auto& im = *impl_;
  const int world = comm.world_size();
  int64_t shard = 0;
  for (const auto& params : units) {
    Impl::Unit u;
    u.params = params;
    for (const auto& p : params) {
      if (p.scalar_type() != at::kFloat || !p.is_leaf() || !p.requires_grad()) {
        throw InternalError("Zero3: parameters must be float32 leaves that require grad");
      }
      u.offsets.push_back(u.numel);
      u.numel += p.numel();
    }
    u.piece = (u.numel + world - 1) / world;
    u.shard_offset = shard;
    shard += u.piece;
    im.total += u.numel;
    im.units.push_back(std::move(u));
  }
  const auto like = units.at(0).at(0).options();  // float32, on the model's device
  im.shard_params = torch::zeros({shard}, like);
  im.shard_grads = torch::zeros({shard}, like);
  torch::NoGradGuard no_grad;
  for (auto& u : im.units) {
    u.full = torch::zeros({u.piece * world}, like);
    for (size_t k = 0; k < u.params.size(); ++k) {
      auto& p = u.params[k];
      u.full.narrow(0, u.offsets[k], p.numel()).copy_(p.reshape({-1}));
      p.set_data(u.full.narrow(0, u.offsets[k], p.numel()).view(p.sizes()));
    }
    im.shard_params.narrow(0, u.shard_offset, u.piece)
        .copy_(u.full.narrow(0, comm.rank() * u.piece, u.piece));
    u.gathered = true;
    im.gathered_bytes += im.Bytes(u);
    im.Free(u);
  }
  for (size_t index = 0; index < im.units.size(); ++index) {
    for (const auto& p : im.units[index].params) {
      Impl* self = impl_.get();
      im.accumulators.push_back(
          OnGradAccumulated(p, [self, index] { self->OnReady(index); }, "Zero3"));
    }
  }
}

Zero3::~Zero3() = default;

void Zero3::Gather(size_t unit) { impl_->Gather(impl_->units.at(unit)); }

at::Tensor Zero3::Release(size_t unit, const at::Tensor& output) {
  auto& im = *impl_;
  if (!im.options.reshard_after_forward) return output;
  im.Free(im.units.at(unit));
  // Before the unit's backward needs its parameters, gather them again.
  if (output.requires_grad()) {
    Impl* self = impl_.get();
    output.register_hook([self, unit](const at::Tensor& grad) {
      self->Gather(self->units[unit]);
      return grad;
    });
  }
  return output;
}

void Zero3::Arm() {
  auto& im = *impl_;
  for (auto& u : im.units) {
    u.ready = 0;
    u.launched = false;
  }
  im.order.clear();
  im.next_harvest = 0;
  im.armed = true;
}

void Zero3::Finish() {
  auto& im = *impl_;
  for (size_t index = 0; index < im.units.size(); ++index) {
    if (!im.units[index].launched) im.Launch(index);
  }
  while (im.next_harvest < im.order.size()) im.Harvest(im.units[im.order[im.next_harvest++]]);
  for (auto& u : im.units) im.Free(u);
  im.armed = false;
}

at::Tensor Zero3::Unshard(const at::Tensor& pieces) {
  auto& im = *impl_;
  const std::vector<at::Tensor> all = im.comm.AllGatherRows(pieces.contiguous());
  std::vector<at::Tensor> parts;
  for (const auto& u : im.units) {
    std::vector<at::Tensor> unit;
    for (const auto& rank : all) unit.push_back(rank.narrow(0, u.shard_offset, u.piece));
    parts.push_back(torch::cat(unit).narrow(0, 0, u.numel));
  }
  return torch::cat(parts);
}

at::Tensor Zero3::ShardOf(const at::Tensor& whole) const {
  const auto& im = *impl_;
  const int world = im.comm.world_size(), rank = im.comm.rank();
  std::vector<at::Tensor> parts;
  int64_t at = 0;
  for (const auto& u : im.units) {
    auto padded = torch::zeros({u.piece * world}, whole.options());
    padded.narrow(0, 0, u.numel).copy_(whole.narrow(0, at, u.numel));
    parts.push_back(padded.narrow(0, rank * u.piece, u.piece));
    at += u.numel;
  }
  return torch::cat(parts);
}

std::vector<int64_t> Zero3::unit_offsets() const {
  std::vector<int64_t> out;
  int64_t at = 0;
  for (const auto& u : impl_->units) {
    out.push_back(at);
    at += u.numel;
  }
  return out;
}

at::Tensor& Zero3::shard_params() { return impl_->shard_params; }
const at::Tensor& Zero3::shard_grads() const { return impl_->shard_grads; }
int64_t Zero3::numel() const { return impl_->total; }
int64_t Zero3::gathered_bytes() const { return impl_->gathered_bytes; }
int64_t Zero3::peak_gathered_bytes() const { return impl_->peak_gathered_bytes; }

}  // namespace topspin
