#include "topspin/dist/slurm_nodelist.h"

#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "topspin/core/error.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

[[noreturn]] void FailHostList(std::string_view list, std::string_view reason) {
  throw Error(ErrorKind::kDist, fmt::format("malformed SLURM host list \"{}\": {}", list, reason),
              ErrorWhere{}, "expected host names and ranges like \"gpu[01-04,07],cpu3\"");
}

// Splits at the commas that are not inside brackets.
std::vector<std::string_view> SplitHosts(std::string_view list) {
  std::vector<std::string_view> hosts;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[' && ++depth > 1) FailHostList(list, "nested '['");
    if (c == ']' && --depth < 0) FailHostList(list, "']' without '['");
    if (c != ',' || depth > 0) continue;
    if (i == start) FailHostList(list, "empty host name");
    hosts.push_back(list.substr(start, i - start));
    start = i + 1;
  }
  if (depth != 0) FailHostList(list, "unclosed '['");
  return hosts;
}

// A non-negative decimal of at most 9 digits (so it fits an int).
std::optional<int> ParseIndex(std::string_view digits) {
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  if (digits.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  int value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return value;
}

// Appends prefix + n + suffix for each n of `item` ("7" or "01-04"), padded
// with zeros to the width of the first number.
void ExpandRange(std::string_view list, std::string_view item, std::string_view prefix,
                 std::string_view suffix, std::vector<std::string>& out) {
  const size_t dash = item.find('-');
  const std::string_view first = item.substr(0, dash);
  const std::string_view last = dash == std::string_view::npos ? first : item.substr(dash + 1);
  const std::optional<int> lo = ParseIndex(first), hi = ParseIndex(last);
  if (!lo || !hi) FailHostList(list, fmt::format("bad range \"{}\"", item));
  if (*lo > *hi) FailHostList(list, fmt::format("range \"{}\" runs backwards", item));
  if (static_cast<size_t>(*hi - *lo) >= kMaxJobHosts - out.size()) {
    FailHostList(list, fmt::format("more than {} hosts", kMaxJobHosts));
  }
  for (int n = *lo; n <= *hi; ++n) {
    out.push_back(fmt::format("{}{:0{}}{}", prefix, n, first.size(), suffix));
  }
}

void ExpandHost(std::string_view list, std::string_view host, std::vector<std::string>& out) {
  const size_t open = host.find('[');
  if (open == std::string_view::npos) {
    if (out.size() >= kMaxJobHosts) {
      FailHostList(list, fmt::format("more than {} hosts", kMaxJobHosts));
    }
    out.emplace_back(host);
    return;
  }
  const size_t close = host.find(']', open);
  const std::string_view suffix = host.substr(close + 1);
  if (suffix.find_first_of("[]") != std::string_view::npos) {
    FailHostList(list, fmt::format("host \"{}\" has more than one bracket group", host));
  }
  const std::string_view body = host.substr(open + 1, close - open - 1);
  for (const std::string& item : Split(body, ',')) {
    ExpandRange(list, item, host.substr(0, open), suffix, out);
  }
}

// "4" -> {4}; "4(x2)" -> {4, 4}.
void ExpandTaskCount(std::string_view value, std::string_view item, std::vector<int>& out) {
  const size_t paren = item.find("(x");
  const std::optional<int> count = ParseIndex(item.substr(0, paren));
  std::optional<int> repeat = 1;
  if (paren != std::string_view::npos) {
    const bool closed = item.back() == ')';
    repeat = closed ? ParseIndex(item.substr(paren + 2, item.size() - paren - 3)) : std::nullopt;
  }
  if (!count || !repeat || *count < 1 || *repeat < 1 ||
      static_cast<size_t>(*repeat) > kMaxJobHosts - out.size()) {
    throw Error(ErrorKind::kDist,
                fmt::format("malformed SLURM tasks per node \"{}\": bad entry \"{}\"", value, item),
                ErrorWhere{}, "expected counts like \"4(x2),3\"");
  }
  out.insert(out.end(), *repeat, *count);
}

}  // namespace

std::vector<std::string> ExpandSlurmNodeList(std::string_view list) {
  list = Trim(list);
  if (list.empty()) FailHostList(list, "empty list");
  std::vector<std::string> out;
  for (const std::string_view host : SplitHosts(list)) ExpandHost(list, host, out);
  return out;
}

std::vector<int> ExpandSlurmTasksPerNode(std::string_view value) {
  std::vector<int> out;
  for (const std::string& item : Split(Trim(value), ',')) ExpandTaskCount(value, item, out);
  return out;
}

}  // namespace topspin
