// train.precision on the compute device. bf16: forward passes run under
// autocast (matmuls in bf16 on fp32 master weights); a Precision::Scope
// turns it on for its lifetime and off again, also when the forward
// throws, and drops autocast's weight cache.
#pragma once

#include <ATen/autocast_mode.h>

#include "topspin/core/config_schema.h"
#include "topspin/train/device.h"

namespace topspin {

class Precision {
 public:
  Precision(const TrainConfig& train, const ComputeDevice& device)
      : bf16_(train.precision == "bf16"),
        type_(device.cuda ? at::kCUDA : at::kCPU) {}

  bool bf16() const { return bf16_; }

  class Scope {
   public:
    explicit Scope(const Precision& p) : p_(p) {
      if (!p_.bf16_) return;
      at::autocast::set_autocast_dtype(p_.type_, at::kBFloat16);
      at::autocast::set_autocast_enabled(p_.type_, true);
    }
    ~Scope() {
      if (!p_.bf16_) return;
      at::autocast::set_autocast_enabled(p_.type_, false);
      at::autocast::clear_cache();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const Precision& p_;
  };

  // forward() under a Scope; the caller casts what the loss reads back to
  // fp32 (under bf16 the outputs are bf16).
  template <typename F>
  auto Run(F&& forward) const {
    auto out = [&] {
      const Scope scope(*this);
      return forward();
    }();
    return out;
  }

 private:
  bool bf16_;
  at::DeviceType type_;
};

}  // namespace topspin
