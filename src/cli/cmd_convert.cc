// topspin convert INPUT...: raw files (csv, jsonl, letor, parquet, text) -> a
// dataset directory of shards plus manifest.json, with a progress line over
// input bytes and a summary at the end.
#include <cctype>
#include <charconv>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/build_info.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/progress.h"
#include "topspin/core/strings.h"
#include "topspin/data/convert.h"

namespace topspin::cli {
namespace {

struct ConvertArgs {
  std::vector<std::string> inputs;
  std::string format;
  std::string out;
  std::string label;
  std::string group;
  std::string columns;
  int threads = 0;
  int zstd_level = 3;
  bool no_byte_planes = false;
  std::string shard_size = "128MiB";
  uint64_t row_group_rows = 65536;
  std::string on_error = "fail";
  bool sort_groups = false;
  std::string tokenizer = "bytes";
  std::string part;  // "K/N"
};

// "K/N" -> (K, N); Error kUsage for anything else (SelectShare checks K < N).
std::pair<uint32_t, uint32_t> ParsePart(const std::string& text) {
  const size_t slash = text.find('/');
  uint32_t k = 0, n = 0;
  const auto number = [](std::string_view s, uint32_t* out) {
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
  };
  if (slash == std::string::npos || !number(std::string_view(text).substr(0, slash), &k) ||
      !number(std::string_view(text).substr(slash + 1), &n)) {
    throw Error(ErrorKind::kUsage, fmt::format("--part {}: expected K/N", text),
                ErrorWhere{.field = "--part"},
                "e.g. --part 0/4 converts the first of four shares of the inputs");
  }
  return {k, n};
}

// "128MiB", "64M", "1G", "4096": K, M, G, T (alone or with B or iB) are
// powers of 1024. Error kUsage for anything else.
uint64_t ParseByteSize(const std::string& text, const char* flag) {
  const auto bad = [&] {
    return Error(ErrorKind::kUsage, fmt::format("{} {}: not a size", flag, text),
                 ErrorWhere{.field = flag}, "write bytes or a size such as 128MiB, 64M or 1G");
  };
  double number = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, number);
  if (ec != std::errc() || ptr == text.data() || number <= 0) throw bad();
  std::string unit(ptr, end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB")) unit.resize(unit.size() - 2);
  if (unit.ends_with("B")) unit.resize(unit.size() - 1);
  int shift = 0;
  if (unit == "K")
    shift = 10;
  else if (unit == "M")
    shift = 20;
  else if (unit == "G")
    shift = 30;
  else if (unit == "T")
    shift = 40;
  else if (!unit.empty())
    throw bad();
  const double bytes = number * static_cast<double>(uint64_t{1} << shift);
  if (bytes < 1 || bytes > 1e18) throw bad();
  return static_cast<uint64_t>(bytes);
}

// "name:type,name:type" -> column types (ParseDType names and aliases).
// With `projection` (parquet) a bare name is allowed too: every name, typed
// or not, is appended to *projection in order.
std::map<std::string, DType> ParseColumnTypes(const std::string& text,
                                              std::vector<std::string>* projection = nullptr) {
  std::map<std::string, DType> types;
  if (text.empty()) return types;
  for (const std::string& item : Split(text, ',')) {
    const size_t colon = item.rfind(':');
    const std::string name(Trim(item.substr(0, colon == std::string::npos ? item.size() : colon)));
    if (projection != nullptr && !name.empty()) projection->push_back(name);
    if (colon == std::string::npos && projection != nullptr && !name.empty()) continue;
    if (colon == std::string::npos || name.empty()) {
      throw Error(ErrorKind::kUsage, fmt::format("--columns \"{}\": expected NAME:TYPE", item),
                  ErrorWhere{.field = "--columns"},
                  "e.g. --columns qid:int64,title:string,price:float64");
    }
    types[name] = ParseDType(Trim(item.substr(colon + 1)), ErrorWhere{.field = "--columns"});
  }
  return types;
}

// The format from the first input's extension when --format is not given.
std::string FormatFor(const ConvertArgs& args) {
  if (!args.format.empty()) return args.format;
  const std::string ext = fs::path(args.inputs.front()).extension().string();
  if (ext == ".csv") return "csv";
  if (ext == ".jsonl" || ext == ".ndjson") return "jsonl";
  if (ext == ".parquet" || fs::is_directory(args.inputs.front())) return "parquet";
  throw Error(ErrorKind::kUsage,
              fmt::format("cannot tell the format of {} from its name", args.inputs.front()),
              ErrorWhere{.field = "--format"}, "pass --format csv|jsonl|letor|parquet|text");
}

ImportOptions ImportOptionsFrom(const ConvertArgs& args) {
  ImportOptions o;
  o.format = FormatFor(args);
  o.label_column = args.label;
  o.group_column = args.group;
  // LETOR lines carry their label and query id: they are the dataset's
  // label and group unless named otherwise.
  if (o.format == "letor") {
    if (o.label_column.empty()) o.label_column = "label";
    if (o.group_column.empty()) o.group_column = "qid";
  }
  o.column_types =
      ParseColumnTypes(args.columns, o.format == "parquet" ? &o.columns : nullptr);
  o.on_error = args.on_error == "skip" ? OnError::kSkip : OnError::kFail;
  o.tokenizer = args.tokenizer;
  if (!args.part.empty()) std::tie(o.part, o.parts) = ParsePart(args.part);
  return o;
}

DatasetWriterOptions WriterOptionsFrom(const ConvertArgs& args) {
  DatasetWriterOptions w;
  w.out = args.out;
  w.shard_bytes = ParseByteSize(args.shard_size, "--shard-size");
  w.row_group_rows = args.row_group_rows;
  w.zstd_level = args.zstd_level;
  w.byte_planes = !args.no_byte_planes;
  w.threads = args.threads;
  w.created_by = fmt::format("topspin {} convert {}", build::kVersion, Join(args.inputs, " "));
  return w;
}

void PrintSummary(const Manifest& m, const ConvertArgs& args, uint64_t input_bytes,
                  const SkipReport& skipped, double seconds) {
  const uint64_t bytes = m.bytes();
  fmt::print("wrote {}: {} rows", args.out, m.rows());
  if (!m.group_column.empty()) fmt::print(", {} groups", m.group_stats.groups);
  fmt::print(", {} columns, {} shard{}, {}", m.schema.size(), m.shards.size(),
             m.shards.size() == 1 ? "" : "s", FormatBytes(bytes));
  fmt::print(" (raw {}, ratio {:.2f}x; input {}) in {:.1f} s\n", FormatBytes(m.raw_bytes()),
             bytes > 0 ? static_cast<double>(m.raw_bytes()) / static_cast<double>(bytes) : 0.0,
             FormatBytes(input_bytes), seconds);
  if (skipped.rows == 0) return;
  std::vector<std::string> reasons;
  for (const auto& [reason, rows] : skipped.reasons)
    reasons.push_back(fmt::format("{} {}", rows, reason));
  fmt::print("skipped {} row{}: {}\n", skipped.rows, skipped.rows == 1 ? "" : "s",
             Join(reasons, ", "));
  for (const auto& example : skipped.examples) fmt::print("  e.g. {}\n", example);
}

void RunConvert(const ConvertArgs& args) {
  const ImportOptions options = ImportOptionsFrom(args);
  const DatasetWriterOptions writer = WriterOptionsFrom(args);
  std::vector<fs::path> inputs(args.inputs.begin(), args.inputs.end());
  std::unique_ptr<Progress> progress;
  uint64_t input_bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  SkipReport skipped;
  const Manifest manifest = Convert(
      inputs, options, writer, args.sort_groups,
      [&](uint64_t read, uint64_t total) {
        if (!progress)
          progress = std::make_unique<Progress>("convert", total, ProgressOptions{.unit = "B"});
        progress->Update(read);
        input_bytes = total;
      },
      &skipped);
  if (progress) progress->Complete();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintSummary(manifest, args, input_bytes, skipped, seconds);
}

}  // namespace

void RegisterConvert(CLI::App& app) {
  static ConvertArgs args;
  auto* cmd = app.add_subcommand(
      "convert", "Import csv, jsonl, letor, parquet or text files into a dataset directory (shards)");
  cmd->add_option("INPUT", args.inputs,
                  "input files, imported in order (parquet: also directories, read recursively "
                  "in sorted order, key=value/ folders becoming columns)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--format", args.format,
                  "csv | jsonl | letor | parquet | text (default: from the first input's "
                  "extension; a directory is parquet)")
      ->check(CLI::IsMember({"csv", "jsonl", "letor", "parquet", "text"}));
  cmd->add_option("--out", args.out, "the dataset directory to create (must not exist)")
      ->required();
  cmd->add_option("--label", args.label, "the label column");
  cmd->add_option("--group", args.group, "the group (query id) column; groups must be contiguous");
  cmd->add_option("--columns", args.columns,
                  "column types overriding inference: name:type,... (float32, float64, int32, "
                  "int64, uint8, bool, string); inferred numbers with a fraction become float32 "
                  "unless given as float64. parquet: the columns to read, in order, each "
                  "optionally :type (name,name:type,...)");
  cmd->add_option("--threads", args.threads, "parser and compression threads (0: one per core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd->add_option("--zstd-level", args.zstd_level, "zstd level; 0 stores uncompressed")
      ->check(CLI::Range(0, 19))
      ->capture_default_str();
  cmd->add_flag("--no-byte-planes", args.no_byte_planes,
                "store numbers as plain zstd only, not also tried as byte planes (codec "
                "zstd-split, smaller and faster to decode): for topspin releases that cannot "
                "read it");
  cmd->add_option("--shard-size", args.shard_size, "target raw bytes per shard: 128MiB, 64M, bytes")
      ->capture_default_str();
  cmd->add_option("--row-group-rows", args.row_group_rows, "target rows per row group")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32))
      ->capture_default_str();
  cmd->add_option("--on-error", args.on_error,
                  "fail: stop at the first malformed row; skip: drop and count malformed rows")
      ->check(CLI::IsMember({"fail", "skip"}))
      ->capture_default_str();
  cmd->add_flag("--sort-groups", args.sort_groups,
                "regroup rows whose groups are not contiguous (holds all rows in memory)");
  cmd->add_option("--tokenizer", args.tokenizer, "text: bytes | sentencepiece:MODEL | gpt2:DIR")
      ->capture_default_str();
  cmd->add_option("--part", args.part,
                  "K/N: convert share K of N of the input files (contiguous, whole files) as a "
                  "part; `topspin dataset merge` joins the N parts into one dataset")
      ->type_name("K/N");
  cmd->callback([] { RunConvert(args); });
}

}  // namespace topspin::cli
