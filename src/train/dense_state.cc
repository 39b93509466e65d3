#include "topspin/train/dense_state.h"

#include <map>

#include <fmt/format.h>
#include <torch/torch.h>

#include "topspin/core/error.h"
#include "topspin/data/safetensors.h"
#include "topspin/ddp/comm.h"
#include "topspin/ddp/grad_sync.h"
#include "topspin/ddp/zero3.h"
#include "train/checkpoint_io.h"

namespace topspin {
namespace {

// Checkpoints before 2026-12 held the dense parameters as this one flat
// tensor; they still load.
constexpr const char* kDenseParams = "dense.params";

}  // namespace

DenseState::DenseState(torch::nn::Module& module, Comm* comm, const Options& options,
                       const std::vector<std::vector<at::Tensor>>& units)
    : comm_(comm), zero_(comm != nullptr ? options.zero : 0) {
  int64_t offset = 0;
  for (const auto& p : module.named_parameters()) {
    slots_.push_back({.name = "dense." + p.key(),
                      .shape = p.value().sizes().vec(),
                      .offset = offset,
                      .numel = p.value().numel()});
    offset += p.value().numel();
  }
  if (zero_ >= 3) {
    if (units.empty()) {
      throw ConfigError("dist.zero 3 shards a model unit by unit, and this model.kind has no "
                        "units (model.kind gpt has)",
                        ErrorWhere{.field = "dist.zero"},
                        "use dist.zero 2: it shards the gradients and optimizer state");
    }
    // Where each parameter lands in Zero3's whole tensor, found by identity
    // before Zero3 points the parameters at its unit buffers.
    std::map<const void*, int64_t> at;
    int64_t u_offset = 0;
    for (const auto& unit : units) {
      for (const auto& p : unit) {
        at[p.unsafeGetTensorImpl()] = u_offset;
        u_offset += p.numel();
      }
    }
    size_t k = 0;
    for (const auto& p : module.named_parameters()) {
        const auto it = at.find(p.value().unsafeGetTensorImpl());
      if (it == at.end()) {
        throw InternalError(fmt::format("ZeRO-3: parameter {} is in no unit", p.key()));
      }
      slots_[k++].unit_offset = it->second;
    }
    zero3_ = std::make_unique<Zero3>(*comm, units, Zero3::Options{});
    shard_numel_ = zero3_->shard_params().numel();
  } else {
    flat_ = std::make_unique<FlatParams>(module, nullptr, /*flat_grads=*/zero_ < 2);
    shard_numel_ = flat_->numel();
    if (zero_ >= 1) {
      // ZeRO-1's shards start at multiples of 64 elements: a vectorised
      // kernel's vector loop then covers the elements an unsharded step's
      // does, and only the buffer's own last elements take its scalar tail,
      // so ZeRO-1 is bitwise ZeRO-0 (our fused CPU loop rounds both alike;
      // ATen's kernels, optim.fused false and CUDA, need not). ZeRO-2's
      // shards are the gradient buckets' (equal pieces).
      const int64_t align = zero_ == 1 ? 64 : 1;
      std::tie(shard_offset_, shard_numel_) =
          ShardRange(flat_->numel(), comm->world_size(), comm->rank(), align);
      // Every rank's shard size, known here: the all-gathers of the shards
      // need no blocking exchange of row counts each step.
      for (int r = 0; r < comm->world_size(); ++r) {
        shard_rows_.push_back(ShardRange(flat_->numel(), comm->world_size(), r, align).second);
      }
    }
    if (comm != nullptr) {
      std::vector<std::pair<int64_t, int64_t>> slots;
      for (const auto& slot : flat_->slots()) slots.emplace_back(slot.offset, slot.numel);
      buckets_ = std::make_unique<GradBuckets>(
          *comm, flat_->parameters(), slots, flat_->grads(),
          GradBuckets::Options{.bucket_bytes = options.bucket_bytes,
                               .overlap = options.overlap,
                               .shard_grads = zero_ >= 2});
    }
  }
  const at::Tensor& like = zero3_ ? zero3_->shard_params() : flat_->params();
  optimizer_ = std::make_unique<DenseOptimizer>(shard_numel_, options.optimizer, like.options());
}

DenseState::~DenseState() = default;

int64_t DenseState::numel() const { return zero3_ ? zero3_->numel() : flat_->numel(); }

void DenseState::Arm() {
  if (buckets_) buckets_->Arm();
  if (zero3_) zero3_->Arm();
}

void DenseState::Finish() {
  if (buckets_) buckets_->Finish();
  if (zero3_) zero3_->Finish();
}

at::Tensor DenseState::grads() const {
  if (zero3_) return zero3_->shard_grads();
  return zero_ >= 2 ? buckets_->shard_grads() : flat_->grads();
}

void DenseState::Step(double lr, double grad_scale) {
  if (zero3_) {
    optimizer_->Step(zero3_->shard_params(), zero3_->shard_grads(), lr, grad_scale);
    return;
  }
  at::Tensor shard = flat_->params().narrow(0, shard_offset_, shard_numel_);
  at::Tensor g = grads();
  if (zero_ >= 2) {
    optimizer_->Step(shard, g, lr, grad_scale);
    flat_->ZeroGrad();  // the parameters' own gradients, reduced into the shard
  } else {
    at::Tensor mine = g.narrow(0, shard_offset_, shard_numel_);
    optimizer_->Step(shard, mine, lr, grad_scale);
    if (shard_numel_ != g.numel()) {  // ZeRO-1: the other ranks' parts
      g.narrow(0, 0, shard_offset_).zero_();
      const int64_t end = shard_offset_ + shard_numel_;
      g.narrow(0, end, g.numel() - end).zero_();
    }
  }
  if (zero_ >= 1) flat_->params().copy_(torch::cat(GatherShards(shard)));
}

std::vector<at::Tensor> DenseState::GatherShards(const at::Tensor& shard) const {
  std::vector<at::Tensor> parts;
  comm_->AllGatherRowsAsync(shard, shard_rows_, parts).Wait();
  return parts;
}

void DenseState::ZeroGrad() {
  if (flat_) flat_->ZeroGrad();  // ZeRO-3 frees every gradient as it reduces it
}

int64_t DenseState::optimizer_steps() const { return optimizer_->steps(); }
void DenseState::set_optimizer_steps(int64_t steps) { optimizer_->set_steps(steps); }

int64_t DenseState::optimizer_bytes() const {
  int64_t bytes = 0;
  for (const auto& t : optimizer_->state()) bytes += t.nbytes();
  return bytes;
}

int64_t DenseState::param_bytes() const {
  return zero3_ ? zero3_->shard_params().nbytes() : flat_->params().nbytes();
}

int64_t DenseState::grad_bytes() const { return grads().nbytes(); }

int64_t DenseState::staging_peak_bytes() const {
  if (zero3_) return zero3_->peak_gathered_bytes();
  return zero_ >= 2 ? buckets_->peak_staging_bytes() : 0;
}

// The parameters by checkpoint name, views of the live flat buffer (stages
// 0-2). Reading a checkpoint that predates the names, the flat tensor.
NamedTensors DenseState::LiveParameters(const SafetensorsFile* reading) {
  if (reading != nullptr && reading->Find(kDenseParams) != nullptr) {
    return {{kDenseParams, flat_->params()}};
  }
  NamedTensors out;
  for (const auto& s : slots_) {
    out.emplace_back(s.name, flat_->params().narrow(0, s.offset, s.numel).view(s.shape));
  }
  return out;
}

at::Tensor DenseState::ToParameterOrder(const at::Tensor& unit_order) const {
  std::vector<at::Tensor> parts;
  for (const auto& s : slots_) parts.push_back(unit_order.narrow(0, s.unit_offset, s.numel));
  return torch::cat(parts);
}

at::Tensor DenseState::ToUnitOrder(const at::Tensor& parameter_order) const {
  auto out = torch::empty_like(parameter_order);
  for (const auto& s : slots_) {
    out.narrow(0, s.unit_offset, s.numel).copy_(parameter_order.narrow(0, s.offset, s.numel));
  }
  return out;
}

NamedTensors DenseState::Gather() {
  NamedTensors out;
  const auto state = optimizer_->state();
  if (zero3_) {
    const at::Tensor params = ToParameterOrder(zero3_->Unshard(zero3_->shard_params()));
    for (const auto& s : slots_) {
      out.emplace_back(s.name, params.narrow(0, s.offset, s.numel).view(s.shape));
    }
    for (size_t i = 0; i < state.size(); ++i) {
      out.emplace_back(fmt::format("dense.opt{}", i), ToParameterOrder(zero3_->Unshard(state[i])));
    }
  } else {
    out = LiveParameters(nullptr);
    for (size_t i = 0; i < state.size(); ++i) {
      // ZeRO-1/2: the shards of the state gathered whole.
      out.emplace_back(fmt::format("dense.opt{}", i),
                       zero_ >= 1 ? torch::cat(GatherShards(state[i])) : state[i]);
    }
  }
  for (auto& [name, t] : out) t = t.to(torch::kCPU).contiguous();
  return out;
}

void DenseState::LoadParameters(const SafetensorsFile& file) {
  torch::NoGradGuard no_grad;
  if (!zero3_) {
    for (auto& [name, t] : LiveParameters(&file)) CopyFromCheckpoint(file, name, t);
    return;
  }
  auto whole = torch::empty({numel()}, torch::kFloat);
  for (const auto& s : slots_) {
    at::Tensor part = whole.narrow(0, s.offset, s.numel).view(s.shape);
    CopyFromCheckpoint(file, s.name, part);
  }
  zero3_->shard_params().copy_(zero3_->ShardOf(ToUnitOrder(whole)));
}

void DenseState::Load(const SafetensorsFile& file) {
  LoadParameters(file);
  auto state = optimizer_->state();
  for (size_t i = 0; i < state.size(); ++i) {
    const std::string name = fmt::format("dense.opt{}", i);
    if (zero3_) {
      auto whole = torch::empty({numel()}, torch::kFloat);
      CopyFromCheckpoint(file, name, whole);
      state[i].copy_(zero3_->ShardOf(ToUnitOrder(whole)));
    } else {
      // A sharded state takes its shard of the whole state saved.
      CopyFromCheckpoint(file, name, state[i], zero_ >= 1 ? shard_offset_ : 0,
                         zero_ >= 1 ? numel() : -1);
    }
  }
}

}  // namespace topspin
