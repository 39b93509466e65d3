// WriteParquetFile (topspin/parquet/parquet_import.h): our tables as Parquet,
// for tests and benchmarks.
#include <memory>
#include <vector>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <fmt/format.h>
#include <parquet/arrow/writer.h>
#include <parquet/properties.h>

#include "topspin/core/error.h"
#include "topspin/parquet/parquet_import.h"

namespace topspin {
namespace {

void Check(const arrow::Status& status, const std::filesystem::path& path) {
  if (!status.ok()) {
    throw IoError(fmt::format("cannot write Parquet: {}", status.ToString()),
                  ErrorWhere{.file = path.string()}, "check free space and permissions");
  }
}

template <typename Builder, typename Append>
std::shared_ptr<arrow::Array> Build(Builder& builder, const Column& column, Append&& append,
                                    const std::filesystem::path& path) {
  for (size_t r = 0; r < column.size(); ++r) {
    Check(column.IsValid(r) ? append(builder, r) : builder.AppendNull(), path);
  }
  std::shared_ptr<arrow::Array> out;
  Check(builder.Finish(&out), path);
  return out;
}

std::shared_ptr<arrow::Array> ToArrow(const Column& c, const std::filesystem::path& path) {
  switch (c.dtype()) {
    case DType::kFloat32: {
      arrow::FloatBuilder b;
      return Build(b, c, [&](auto& x, size_t r) { return x.Append(c.Values<float>()[r]); }, path);
    }
    case DType::kFloat64: {
      arrow::DoubleBuilder b;
      return Build(b, c, [&](auto& x, size_t r) { return x.Append(c.Values<double>()[r]); }, path);
    }
    case DType::kInt32: {
      arrow::Int32Builder b;
      return Build(b, c, [&](auto& x, size_t r) { return x.Append(c.Values<int32_t>()[r]); }, path);
    }
    case DType::kInt64: {
      arrow::Int64Builder b;
      return Build(b, c, [&](auto& x, size_t r) { return x.Append(c.Values<int64_t>()[r]); }, path);
    }
    case DType::kUInt8: {
      arrow::UInt8Builder b;
      return Build(b, c, [&](auto& x, size_t r) { return x.Append(c.Values<uint8_t>()[r]); }, path);
    }
    case DType::kBool: {
      arrow::BooleanBuilder b;
      return Build(b, c, [&](auto& x, size_t r) { return x.Append(c.Values<uint8_t>()[r] != 0); },
                   path);
    }
    case DType::kString: {
      arrow::StringBuilder b;
      return Build(b, c, [&](auto& x, size_t r) { return x.Append(c.StringAt(r)); }, path);
    }
    case DType::kTokensU16:
    case DType::kTokensU32: {
      const bool u16 = c.dtype() == DType::kTokensU16;
      std::shared_ptr<arrow::ArrayBuilder> items;
      if (u16) {
        items = std::make_shared<arrow::UInt16Builder>();
      } else {
        items = std::make_shared<arrow::UInt32Builder>();
      }
      arrow::ListBuilder b(arrow::default_memory_pool(), items);
      return Build(
          b, c,
          [&](auto& x, size_t r) {
            auto status = x.Append();
            for (uint32_t t : c.TokensAt(r)) {
              if (!status.ok()) break;
              status = u16 ? static_cast<arrow::UInt16Builder&>(*items).Append(uint16_t(t))
                           : static_cast<arrow::UInt32Builder&>(*items).Append(t);
            }
            return status;
          },
          path);
    }
  }
  throw InternalError("WriteParquetFile: unknown dtype");
}

}  // namespace

void WriteParquetFile(const std::filesystem::path& path, const Table& table,
                      int64_t row_group_rows) {
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  for (const Column& column : table.columns) {
    arrays.push_back(ToArrow(column, path));
    fields.push_back(arrow::field(column.name(), arrays.back()->type()));
  }
  const auto arrow_table = arrow::Table::Make(arrow::schema(fields), arrays);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  auto file = arrow::io::FileOutputStream::Open(path.string());
  Check(file.status(), path);
  const auto properties = parquet::WriterProperties::Builder()
                              .compression(parquet::Compression::ZSTD)
                              ->compression_level(3)
                              ->build();
  Check(parquet::arrow::WriteTable(*arrow_table, arrow::default_memory_pool(), *file,
                                   row_group_rows, properties),
        path);
  Check((*file)->Close(), path);
}

}  // namespace topspin
