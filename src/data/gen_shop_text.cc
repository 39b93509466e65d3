// The shop generator's text writers: CSV and LETOR.
#include <filesystem>
#include <iterator>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "data/gen_shop_blocks.h"
#include "data/gen_shop_columns.h"
#include "topspin/core/files.h"
#include "topspin/data/gen_shop.h"

namespace topspin {
namespace {

using namespace shop_internal;  // NOLINT: the column enum

using Buffer = fmt::memory_buffer;

// How FormatValue spells bools and integral floats.
struct Spelling {
  const char* yes;
  const char* no;
  bool float_point;  // "3.0" rather than "3", so CSV type inference sees a float
};
constexpr Spelling kCsvSpelling = {"true", "false", true};
constexpr Spelling kLetorSpelling = {"1", "0", false};

// Writes row `r` of `column` (not null) as text.
void FormatValue(const Column& column, size_t r, Buffer& out, const Spelling& spelling) {
  const auto it = std::back_inserter(out);
  const size_t start = out.size();
  switch (column.dtype()) {
    case DType::kFloat32:
      fmt::format_to(it, FMT_COMPILE("{}"), column.Values<float>()[r]);
      if (spelling.float_point &&
          std::string_view(out.data() + start, out.size() - start).find_first_of(".en") ==
              std::string_view::npos) {
        out.append(std::string_view(".0"));
      }
      break;
    case DType::kInt32: fmt::format_to(it, FMT_COMPILE("{}"), column.Values<int32_t>()[r]); break;
    case DType::kInt64: fmt::format_to(it, FMT_COMPILE("{}"), column.Values<int64_t>()[r]); break;
    case DType::kBool:
      out.append(std::string_view(column.Values<uint8_t>()[r] ? spelling.yes : spelling.no));
      break;
    default: fmt::format_to(it, FMT_COMPILE("{}"), column.AsDouble(r)); break;
  }
}

void FormatCsv(ShopBlock& block) {
  const Table& table = block.table;
  Buffer out;
  for (size_t r = 0; r < table.rows(); ++r) {
    for (size_t c = 0; c < table.columns.size(); ++c) {
      if (c > 0) out.push_back(',');
      if (table.columns[c].IsValid(r)) FormatValue(table.columns[c], r, out, kCsvSpelling);
    }
    out.push_back('\n');
  }
  block.text = fmt::to_string(out);
}

void FormatLetor(ShopBlock& block) {
  const Table& table = block.table;
  const auto qids = table.columns[kQid].Values<int64_t>();
  const auto labels = table.columns[kLabel].Values<float>();
  Buffer out;
  const auto it = std::back_inserter(out);
  size_t position = 0;
  for (size_t r = 0; r < table.rows(); ++r) {
    position = r > 0 && qids[r] == qids[r - 1] ? position + 1 : 0;
    fmt::format_to(it, FMT_COMPILE("{} qid:{}"), labels[r], qids[r]);
    for (int c = kFirstFeature; c < kShopColumns; ++c) {
      if (!table.columns[c].IsValid(r)) continue;
      fmt::format_to(it, FMT_COMPILE(" {}:"), c - kFirstFeature + 1);
      FormatValue(table.columns[c], r, out, kLetorSpelling);
    }
    fmt::format_to(it, FMT_COMPILE(" # {}-{}\n"), qids[r], position);
  }
  block.text = fmt::to_string(out);
}

ShopWriteSummary WriteText(const std::filesystem::path& path, const ShopOptions& options,
                           const std::string& header, void (*format)(ShopBlock&),
                           const ShopProgressFn& progress) {
  ValidateShopOptions(options);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  AtomicFileWriter file(path);
  file.Write(header);
  ShopWriteSummary summary;
  RunShopBlocks(
      options, format,
      [&](ShopBlock& block) {
        file.Write(block.text);
        summary.rows += block.table.rows();
      },
      progress);
  file.Commit();
  summary.queries = options.queries;
  summary.bytes = file.bytes_written();
  return summary;
}

}  // namespace

ShopWriteSummary WriteShopCsv(const std::filesystem::path& path, const ShopOptions& options,
                              const ShopProgressFn& progress) {
  std::vector<std::string> names;
  for (const auto& spec : ShopSchema()) names.push_back(spec.name);
  return WriteText(path, options, fmt::format("{}\n", fmt::join(names, ",")), FormatCsv, progress);
}

ShopWriteSummary WriteShopLetor(const std::filesystem::path& path, const ShopOptions& options,
                                const ShopProgressFn& progress) {
  return WriteText(path, options, "", FormatLetor, progress);
}

}  // namespace topspin
