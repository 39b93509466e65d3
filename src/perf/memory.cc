#include "topspin/perf/memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/resource.h>

#include "topspin/core/strings.h"

namespace topspin {
namespace {

// A field of /proc/self/status in bytes; nullopt when unreadable.
std::optional<uint64_t> ReadStatusBytes(std::string_view key) {
  std::ifstream in("/proc/self/status");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return ParseProcStatusBytes(text.str(), key);
}

// getrusage's peak RSS: kilobytes on Linux.
uint64_t RusagePeakBytes() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0 || usage.ru_maxrss < 0) return 0;
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  return text.str();
}

// A cgroup v2 file holding one number ("max" or missing: nullopt).
std::optional<uint64_t> ReadCgroupNumber(const std::string& path) {
  const std::string text(Trim(ReadSmallFile(path.c_str())));
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

uint64_t AvailableMemoryBytes() {
  uint64_t available = ParseProcStatusBytes(ReadSmallFile("/proc/meminfo"), "MemAvailable").value_or(0);
  // This process's cgroup: "0::/path" in /proc/self/cgroup (v2).
  std::string group;
  for (const std::string& line : Split(ReadSmallFile("/proc/self/cgroup"), '\n')) {
    if (line.starts_with("0::")) group = line.substr(3);
  }
  if (!group.empty()) {
    const std::string dir = "/sys/fs/cgroup" + (group == "/" ? std::string() : group);
    const auto limit = ReadCgroupNumber(dir + "/memory.max");
    const auto used = ReadCgroupNumber(dir + "/memory.current");
    if (limit && used) {
      const uint64_t left = *limit > *used ? *limit - *used : 0;
      available = available == 0 ? left : std::min(available, left);
    }
  }
  return available;
}

std::optional<uint64_t> ParseProcStatusBytes(std::string_view status, std::string_view key) {
  for (const std::string& line : Split(status, '\n')) {
    const std::string_view view(line);
    if (view.size() <= key.size() || view.substr(0, key.size()) != key) continue;
    if (view[key.size()] != ':') continue;
    std::string_view rest = Trim(view.substr(key.size() + 1));
    if (rest.size() < 3 || rest.substr(rest.size() - 3) != " kB") return std::nullopt;
    rest = Trim(rest.substr(0, rest.size() - 3));
    uint64_t kib = 0;
    const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
    if (rest.empty() || ec != std::errc() || ptr != rest.data() + rest.size()) return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

uint64_t CurrentRssBytes() {
  return ReadStatusBytes("VmRSS").value_or(0);
}

uint64_t PeakRssBytes() {
  if (std::optional<uint64_t> peak = ReadStatusBytes("VmHWM")) return *peak;
  return RusagePeakBytes();
}

bool ResetPeakRss() {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
}

}  // namespace topspin
