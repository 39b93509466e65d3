// How the ranks of a job find each other (Comm::Connect in
// topspin/ddp/comm.h). Torch-free, so launchers and the CLI can fill it in.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

namespace topspin {

struct RendezvousOptions {
  // Every store and collective operation fails after this long (dist.timeout_s).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Non-empty: rendezvous through this file (one host, no open port);
  // empty: a TCPStore at the launch environment's master address and port.
  std::filesystem::path file_store;
  // The job token every rank must prove when the job spans hosts
  // (TOPSPIN_JOB_TOKEN or dist.token_file).
  std::string token;
  // Which c10d backend sums device (CUDA) tensors: "auto" or "nccl" gives
  // NCCL when `cuda_device` >= 0, "gloo" refuses CUDA tensors. Host tensors
  // always travel over Gloo (dist.backend).
  std::string backend = "auto";
  // The CUDA device this rank computes on (its local rank), or -1 on CPU.
  int cuda_device = -1;
};

}  // namespace topspin
