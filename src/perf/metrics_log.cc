// Reading metrics.jsonl back for `topspin report` (topspin/perf/report.h).
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/strings.h"
#include "topspin/perf/report.h"

namespace topspin {
namespace {

constexpr const char* kFixHint =
    "each line must be one JSON object with an integer \"step\", as the trainer writes them; "
    "fix or delete the line, then run the report again";

// A line a killed run cut short is a prefix of a valid object: the parser
// runs off its end wanting more, and reports a position past the last byte.
bool CutShort(const nlohmann::json::parse_error& e, std::string_view line) {
  return e.byte > line.size();
}

// "syntax error while parsing value - invalid literal; ..." out of
// nlohmann's "[json.exception.parse_error.101] parse error at line 1,
// column 21: syntax error ...": the position is already in the message's
// where.
std::string Reason(const nlohmann::json::parse_error& e) {
  const std::string what = e.what();
  const auto at = what.find(": syntax error");
  return at == std::string::npos ? what : what.substr(at + 2);
}

// A value JsonlWriter wrote: a number, or a non-finite one spelt as a string.
bool ToDouble(const nlohmann::json& v, double& out) {
  if (v.is_number()) {
    out = v.get<double>();
    return true;
  }
  if (!v.is_string()) return false;
  static const std::map<std::string, double> kNonFinite = {
      {"nan", std::numeric_limits<double>::quiet_NaN()}, {"inf", INFINITY}, {"-inf", -INFINITY}};
  const auto it = kNonFinite.find(v.get_ref<const std::string&>());
  if (it == kNonFinite.end()) return false;
  out = it->second;
  return true;
}

MetricsRecord ToRecord(const nlohmann::json& doc, const std::string& file, int64_t line) {
  const auto step = doc.is_object() ? doc.find("step") : doc.end();
  if (!doc.is_object() || step == doc.end() || !step->is_number_integer()) {
    throw DataError(doc.is_object() ? "the record has no integer \"step\"" : "not a JSON object",
                    {.file = file, .line = line}, kFixHint);
  }
  MetricsRecord r;
  r.step = step->get<int64_t>();
  for (const auto& [name, value] : doc.items()) {
    double number = 0;
    if (name == "step" || !ToDouble(value, number)) continue;
    (name == "time" ? r.time : r.values[name]) = number;
  }
  return r;
}

bool IsEval(const MetricsRecord& r) {
  for (const auto& [name, value] : r.values) {
    if (name.starts_with("valid/")) return true;
  }
  return false;
}

std::vector<MetricsRecord> Values(std::map<int64_t, MetricsRecord>& by_step) {
  std::vector<MetricsRecord> out;
  out.reserve(by_step.size());
  for (auto& [step, record] : by_step) out.push_back(std::move(record));
  return out;
}

}  // namespace

MetricsLog ParseMetricsLog(std::string_view text, const std::string& file) {
  MetricsLog log;
  std::map<int64_t, MetricsRecord> train, eval;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    const bool last = end == std::string_view::npos;  // no newline: the write stopped here
    const std::string_view line = text.substr(pos, last ? std::string_view::npos : end - pos);
    pos = last ? text.size() : end + 1;
    ++line_no;
    if (Trim(line).empty()) continue;
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      // A killed run leaves its last line partial; a resumed run starts a
      // new line after it (JsonlWriter), so the partial one can also sit
      // in the middle.
      if (last || CutShort(e, line)) {
        log.warnings.push_back(
            fmt::format("{}:{}: skipped a line cut short (the run was killed while writing it{})",
                        file, line_no, last ? "" : ", then resumed"));
        continue;
      }
      throw DataError(fmt::format("malformed JSON: {}", Reason(e)),
                      {.file = file, .line = line_no, .column = int64_t(e.byte)}, kFixHint);
    }
    MetricsRecord record = ToRecord(doc, file, line_no);
    auto& into = IsEval(record) ? eval : train;
    const int64_t step = record.step;
    if (!into.insert_or_assign(step, std::move(record)).second) ++log.replaced;
  }
  log.train = Values(train);
  log.eval = Values(eval);
  return log;
}

MetricsLog ReadMetricsLog(const std::filesystem::path& path) {
  return ParseMetricsLog(ReadFile(path), path.string());
}

}  // namespace topspin
