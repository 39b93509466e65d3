#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "perf/append_file.h"
#include "topspin/perf/metrics_sink.h"

namespace topspin {
namespace {

using Json = nlohmann::ordered_json;

// JSON has no NaN or infinity; those become strings.
Json NumberOrString(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// True when `path` is missing, empty or ends with a newline.
bool EndsWithNewline(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || in.tellg() <= 0) return true;
  in.seekg(-1, std::ios::end);
  return in.get() == '\n';
}

std::filesystem::path PreparedPath(std::filesystem::path path) {
  if (path.has_parent_path()) perf_internal::CreateDirectories(path.parent_path());
  return path;
}

}  // namespace

struct JsonlWriter::Impl {
  explicit Impl(std::filesystem::path path)
      : torn_tail(!EndsWithNewline(path)),
        file(PreparedPath(std::move(path)), /*exclusive=*/false) {}

  bool torn_tail;  // a crash left a partial last line
  perf_internal::AppendFile file;
  std::string buffer;  // whole lines not yet written (a full disk refused them)
};

JsonlWriter::JsonlWriter(std::filesystem::path path)
    : impl_(std::make_unique<Impl>(std::move(path))) {
  if (impl_->torn_tail) impl_->buffer.push_back('\n');
}

JsonlWriter::~JsonlWriter() {
  try {
    Flush();
  } catch (...) {
    perf_internal::LogDestructorFailure("jsonl metrics lost at exit");
  }
}

void JsonlWriter::Write(int64_t step, const MetricValues& values, double wall_time) {
  Json line = {{"step", step}, {"time", NumberOrString(wall_time)}};
  for (const auto& [name, value] : values) {
    if (name == "step" || name == "time") {
      throw InternalError("metrics: \"" + name + "\" is reserved in " + path().string() +
                          "; rename the metric");
    }
    line[name] = NumberOrString(value);
  }
  impl_->buffer += line.dump(-1, ' ', false, Json::error_handler_t::replace);
  impl_->buffer += '\n';
  impl_->file.Drain(impl_->buffer);
}

void JsonlWriter::Flush() {
  impl_->file.Drain(impl_->buffer);
  impl_->file.Sync();
}

const std::filesystem::path& JsonlWriter::path() const {
  return impl_->file.path();
}

}  // namespace topspin
