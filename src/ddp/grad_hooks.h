// Internal to the ddp module: a callback after autograd has accumulated a
// parameter's gradient (GradBuckets and Zero3 launch their collectives
// from it).
#pragma once

#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>

namespace torch::autograd {
struct Node;
}

namespace topspin {

// Calls on_ready() each time backward has accumulated `param`'s gradient
// (param.grad() is then complete for this backward). Returns the gradient
// accumulator: the caller keeps it, because the graph holds it only weakly
// and the hook dies with it. Error{kInternal} when `param` is not a leaf
// that requires grad; `who` names the caller in that message.
std::shared_ptr<torch::autograd::Node> OnGradAccumulated(const at::Tensor& param,
                                                         std::function<void()> on_ready,
                                                         const char* who);

}  // namespace topspin
