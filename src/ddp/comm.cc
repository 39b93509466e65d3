#include "topspin/ddp/comm.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>
#ifdef TOPSPIN_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "topspin/core/error.h"
#include "topspin/core/fault.h"
#include "topspin/core/sha256.h"

namespace topspin {
namespace {

Error DistError(std::string what, std::string field, std::string hint) {
  return Error(ErrorKind::kDist, std::move(what), ErrorWhere{.field = std::move(field)},
               std::move(hint));
}

constexpr const char* kTimeoutHint =
    "another rank died or stalled: see its output above; dist.timeout_s sets how long ranks wait";

// Runs a c10d call, turning its exceptions into Error{kDist} naming `what`.
template <typename F>
auto Guard(const std::string& what, int rank, F&& f) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (const auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    throw DistError(fmt::format("rank {}: {} failed: {}", rank, what, msg), "dist", kTimeoutHint);
  }
}

// Runs f (a wait on a collective) under Guard, adding the seconds it
// blocked to *blocked.
template <typename F>
auto Blocking(double* blocked, const std::string& what, int rank, F&& f) {
  const auto start = std::chrono::steady_clock::now();
  struct Add {
    double* to;
    std::chrono::steady_clock::time_point from;
    ~Add() {
      if (to != nullptr) {
        *to += std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
      }
    }
  } add{blocked, start};
  InjectFault("comm.wait");
  return Guard(what, rank, std::forward<F>(f));
}

std::string Bytes(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }
std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::string Proof(const std::string& token, const std::string& nonce, int rank) {
  return Sha256Hex(fmt::format("topspin-job:{}:{}:{}", token, nonce, rank));
}

// Rank 0 checks every other rank's proof of the job token; all ranks learn
// the verdict and fail together when one rank is refused.
constexpr const char* kNoToken = "no-token";

void CheckToken(c10d::Store& store, const LaunchEnv& env, const std::string& token) {
  if (token.empty()) {
    // Say so in the store first: the ranks waiting for this one's proof
    // fail now, naming it, instead of at the timeout.
    if (env.rank == 0) {
      store.set("auth/nonce", Bytes(""));
      store.set("auth/verdict", Bytes("rank 0 has no job token (TOPSPIN_JOB_TOKEN is unset on "
                                      "its host)"));
    } else {
      store.set(fmt::format("auth/proof/{}", env.rank), Bytes(kNoToken));
    }
    throw DistError(
        fmt::format("the job's store ({}:{}) is reachable from other hosts, and the job has no "
                    "token",
                    env.master_addr, env.master_port),
        "TOPSPIN_JOB_TOKEN",
        "set TOPSPIN_JOB_TOKEN (the same secret on every rank) or dist.token_file; or, on one "
        "host, MASTER_ADDR=127.0.0.1");
  }
  if (env.rank == 0) {
    std::random_device rd;
    const std::string nonce = fmt::format("{:016x}{:016x}", uint64_t(rd()) << 32 | rd(),
                                          uint64_t(rd()) << 32 | rd());
    store.set("auth/nonce", Bytes(nonce));
    std::string verdict = "ok";
    for (int r = 1; r < env.world_size && verdict == "ok"; ++r) {
      const std::string key = fmt::format("auth/proof/{}", r);
      const std::string proof = Bytes(store.get(key));
      if (proof == kNoToken) {
        verdict = fmt::format(
            "rank {} was refused: it has no job token (TOPSPIN_JOB_TOKEN is unset on its host)", r);
      } else if (proof != Proof(token, nonce, r)) {
        verdict = fmt::format("rank {} was refused: it presented a wrong job token", r);
      }
    }
    store.set("auth/verdict", Bytes(verdict));
    if (verdict != "ok") {
      throw DistError(verdict, "TOPSPIN_JOB_TOKEN",
                      "start every rank with the same TOPSPIN_JOB_TOKEN (or dist.token_file)");
    }
    return;
  }
  const std::string nonce = Bytes(store.get("auth/nonce"));
  store.set(fmt::format("auth/proof/{}", env.rank), Bytes(Proof(token, nonce, env.rank)));
  const std::string verdict = Bytes(store.get("auth/verdict"));
  if (verdict != "ok") {
    throw DistError(fmt::format("{} (this is rank {})", verdict, env.rank), "TOPSPIN_JOB_TOKEN",
                    "start every rank with the same TOPSPIN_JOB_TOKEN (or dist.token_file)");
  }
}

bool AgentStore() {
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  return agent != nullptr && std::string(agent) == "True";
}

// The addresses `host` resolves to (numeric, or by name), for TCP.
struct Resolved {
  explicit Resolved(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
    if (rc != 0) {
      throw DistError(fmt::format("cannot resolve MASTER_ADDR {}: {}", host, ::gai_strerror(rc)),
                      "MASTER_ADDR", "set MASTER_ADDR to rank 0's host name or IP address");
    }
  }
  ~Resolved() { ::freeaddrinfo(list); }
  Resolved(const Resolved&) = delete;
  Resolved& operator=(const Resolved&) = delete;
  addrinfo* list = nullptr;
};

// True when every address of `host` is a loopback one: a store there is
// out of reach of other hosts.
bool IsLoopback(const std::string& host, int port) {
  const Resolved r(host, port);
  for (const addrinfo* a = r.list; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      if ((ntohl(in->sin_addr.s_addr) >> 24) != 127) return false;
    } else if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      if (!IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return false;
    }
  }
  return true;
}

// A listening socket on `host`:`port` only (not every interface), handed
// to the TCP store's server.
int ListenOn(const std::string& host, int port) {
  const Resolved r(host, port);
  int err = EADDRNOTAVAIL;
  for (const addrinfo* a = r.list; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) return fd;
    err = errno;
    ::close(fd);
  }
  throw DistError(fmt::format("rank 0 cannot serve the store on {}:{}: {}", host, port,
                              std::strerror(err)),
                  "MASTER_ADDR",
                  err == EADDRINUSE ? "another job uses the port: set another MASTER_PORT"
                                    : "MASTER_ADDR must be an address of rank 0's host");
}

c10::intrusive_ptr<c10d::Store> MakeStore(const LaunchEnv& env, const CommOptions& o) {
  if (!o.file_store.empty()) {
    auto store = c10::make_intrusive<c10d::FileStore>(o.file_store.string(), env.world_size);
    store->setTimeout(o.timeout);
    return store;
  }
  c10d::TCPStoreOptions t;
  t.port = static_cast<uint16_t>(env.master_port);
  t.isServer = env.rank == 0 && !AgentStore();
  // The server listens on MASTER_ADDR alone: 127.0.0.1 keeps the store on
  // this host.
  if (t.isServer) t.masterListenFd = ListenOn(env.master_addr, env.master_port);
  t.numWorkers = static_cast<size_t>(env.world_size);
  t.waitWorkers = false;
  t.timeout = o.timeout;
  return c10::make_intrusive<c10d::TCPStore>(env.master_addr, t);
}

std::shared_ptr<gloo::transport::Device> MakeDevice(const LaunchEnv& env) {
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface != nullptr && *iface) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(iface);
  }
  if (env.num_nodes == 1) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

std::string NcclVersion() {
#ifdef TOPSPIN_WITH_NCCL
  return c10d::getNcclVersion();
#else
  return "";
#endif
}

struct CommWork::Impl {
  c10::intrusive_ptr<c10d::Work> work;
  std::string what;
  int rank = 0;
  double* blocked = nullptr;  // the Comm's blocked_seconds
};

CommWork::CommWork() = default;
CommWork::~CommWork() {
  if (pending()) {
    try {
      Wait();
    } catch (const std::exception&) {
      // The failure was (or will be) reported by the collective that follows.
    }
  }
}
CommWork::CommWork(CommWork&&) noexcept = default;
CommWork& CommWork::operator=(CommWork&&) noexcept = default;
bool CommWork::pending() const { return impl_ && impl_->work; }
bool CommWork::Ready() const { return !pending() || impl_->work->isCompleted(); }
void CommWork::Wait() {
  if (!pending()) return;
  auto work = std::move(impl_->work);
  Blocking(impl_->blocked, impl_->what, impl_->rank, [&] { return work->wait(); });
}

// Wraps a collective launched by `launch` (under Guard) as a CommWork whose
// Wait() counts into *blocked.
struct CommWorkStart {
  template <typename F>
  static CommWork Start(std::string what, int rank, double* blocked, F&& launch) {
    CommWork w;
    w.impl_ = std::make_unique<CommWork::Impl>();
    w.impl_->work = Guard(what, rank, std::forward<F>(launch));
    w.impl_->what = std::move(what);
    w.impl_->rank = rank;
    w.impl_->blocked = blocked;
    return w;
  }
};

struct Comm::Impl {
  LaunchEnv env;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> gloo;  // host tensors (and CUDA ones without NCCL)
  c10::intrusive_ptr<c10d::Backend> nccl;  // CUDA tensors, when this rank has a GPU
  double blocked_s = 0;

  // The group that moves `t`; every tensor of one collective shares a device.
  c10d::Backend& For(const at::Tensor& t) {
    if (!t.is_cuda()) return *gloo;
    if (!nccl) {
      throw ConfigError("a CUDA tensor reached a collective without NCCL",
                        ErrorWhere{.field = "dist.backend"},
                        "use dist.backend auto or nccl when training on GPUs");
    }
    return *nccl;
  }
};

namespace {

// The NCCL group for CUDA tensors, or null: dist.backend "gloo" or a rank
// on the CPU. Errors when NCCL is asked for and cannot be had.
c10::intrusive_ptr<c10d::Backend> MakeNccl(const c10::intrusive_ptr<c10d::Store>& store,
                                           const LaunchEnv& env, const CommOptions& o) {
  if (o.backend == "gloo" || (o.backend == "auto" && o.cuda_device < 0)) return {};
  if (o.cuda_device < 0) {
    throw ConfigError("dist.backend nccl needs a GPU, and this rank computes on the CPU",
                      ErrorWhere{.field = "dist.backend"},
                      "set train.device cuda (or auto on a GPU machine), or dist.backend gloo");
  }
#ifdef TOPSPIN_WITH_NCCL
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(o.cuda_device));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = o.timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(
      c10::make_intrusive<c10d::PrefixStore>("topspin/nccl", store), env.rank, env.world_size,
      options);
#else
  throw ConfigError("this topspin was built without NCCL (a CPU-only LibTorch)",
                    ErrorWhere{.field = "dist.backend"},
                    "build against a CUDA LibTorch (the torch wheel scripts/install-deps.sh "
                    "installs), or set dist.backend gloo");
#endif
}

}  // namespace

Comm::Comm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Comm::~Comm() = default;

std::unique_ptr<Comm> Comm::Connect(const LaunchEnv& env, const CommOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->env = env;
  const std::string where =
      options.file_store.empty()
          ? fmt::format("the store at {}:{}", env.master_addr, env.master_port)
          : fmt::format("the file store {}", options.file_store.string());
  Guard(fmt::format("joining {}", where), env.rank, [&] {
    impl->store = MakeStore(env, options);
    // The token guards every store another host can reach: several
    // nodes, or one node whose store listens on a non-loopback address.
    const bool reachable =
        env.num_nodes > 1 || (options.file_store.empty() && !AgentStore() &&
                              !IsLoopback(env.master_addr, env.master_port));
    if (reachable) CheckToken(*impl->store, env, options.token);
    auto pg_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
    pg_options->devices = {MakeDevice(env)};
    pg_options->threads = 2;
    impl->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("topspin/pg", impl->store), env.rank,
        env.world_size, pg_options);
    return 0;
  });
  impl->nccl = MakeNccl(impl->store, env, options);
  return std::unique_ptr<Comm>(new Comm(std::move(impl)));
}

int Comm::rank() const { return impl_->env.rank; }
int Comm::world_size() const { return impl_->env.world_size; }
double Comm::blocked_seconds() const { return impl_->blocked_s; }
const char* Comm::device_backend() const { return impl_->nccl ? "nccl" : "gloo"; }

CommWork Comm::AllReduceSumAsync(at::Tensor t) {
  c10d::Backend& pg = impl_->For(t);
  std::vector<at::Tensor> tensors{std::move(t)};
  return CommWorkStart::Start("all-reduce", rank(), &impl_->blocked_s,
                              [&] { return pg.allreduce(tensors); });
}

CommWork Comm::ReduceScatterSumAsync(std::vector<at::Tensor> pieces, at::Tensor out) {
  if (int(pieces.size()) != world_size() || !out.defined() ||
      out.sizes() != pieces[size_t(rank())].sizes()) {
    throw InternalError("ReduceScatterSumAsync: one piece per rank, this rank's shaped like out");
  }
  c10d::Backend& pg = impl_->For(out);
  std::vector<at::Tensor> outputs{std::move(out)};
  std::vector<std::vector<at::Tensor>> inputs{std::move(pieces)};
  return CommWorkStart::Start("reduce-scatter", rank(), &impl_->blocked_s,
                              [&] { return pg.reduce_scatter(outputs, inputs); });
}

std::vector<at::Tensor> Comm::AllGatherRows(const at::Tensor& t) {
  const int w = world_size();
  std::vector<at::Tensor> in{torch::tensor({t.size(0)}, torch::kLong)};
  std::vector<std::vector<at::Tensor>> sizes(1);
  for (int r = 0; r < w; ++r) sizes[0].push_back(torch::empty({1}, torch::kLong));
  Blocking(&impl_->blocked_s, "all-gather of row counts", rank(),
           [&] { return impl_->gloo->allgather(sizes, in)->wait(); });
  std::vector<int64_t> rows;
  for (const auto& s : sizes[0]) rows.push_back(s.item<int64_t>());
  std::vector<at::Tensor> out;
  AllGatherRowsAsync(t, rows, out).Wait();
  return out;
}

CommWork Comm::AllGatherRowsAsync(const at::Tensor& t, const std::vector<int64_t>& rows,
                                  std::vector<at::Tensor>& out) {
  const int w = world_size();
  if (int(rows.size()) != w || rows[size_t(rank())] != t.size(0)) {
    throw InternalError("AllGatherRowsAsync: row counts do not match the ranks");
  }
  const int64_t most = *std::max_element(rows.begin(), rows.end());
  auto shape = t.sizes().vec();
  shape[0] = most;
  at::Tensor padded = torch::zeros(shape, t.options());
  if (t.size(0) > 0) padded.narrow(0, 0, t.size(0)).copy_(t);
  std::vector<at::Tensor> send{padded};
  std::vector<std::vector<at::Tensor>> got(1);
  out.clear();
  for (int r = 0; r < w; ++r) {
    got[0].push_back(torch::empty(shape, t.options()));
    out.push_back(got[0].back().narrow(0, 0, rows[size_t(r)]));
  }
  c10d::Backend& pg = impl_->For(t);
  return CommWorkStart::Start("all-gather", rank(), &impl_->blocked_s,
                              [&] { return pg.allgather(got, send); });
}

void Comm::AllGatherInto(const at::Tensor& piece, const std::vector<at::Tensor>& out) {
  c10d::Backend& pg = impl_->For(piece);
  std::vector<at::Tensor> send{piece};
  std::vector<std::vector<at::Tensor>> got{out};
  Blocking(&impl_->blocked_s, "all-gather", rank(),
           [&] { return pg.allgather(got, send)->wait(); });
}

void Comm::Broadcast(at::Tensor t, int root) {
  c10d::Backend& pg = impl_->For(t);
  std::vector<at::Tensor> tensors{std::move(t)};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  Blocking(&impl_->blocked_s, "broadcast", rank(),
           [&] { return pg.broadcast(tensors, o)->wait(); });
}

void Comm::Barrier() {
  // Gloo's barrier; an all-reduce of one number has the same effect and
  // reports a dead peer the same way.
  AllReduceSum(torch::zeros({1}));
}

void Comm::SetString(const std::string& key, const std::string& value) {
  Guard("store set", rank(), [&] {
    impl_->store->set("topspin/kv/" + key, Bytes(value));
    return 0;
  });
}

std::string Comm::GetString(const std::string& key) {
  return Guard("store get", rank(), [&] { return Bytes(impl_->store->get("topspin/kv/" + key)); });
}

}  // namespace topspin
