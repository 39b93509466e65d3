// Parquet import (`topspin convert --format parquet`), on Arrow C++ and
// Parquet from the pyarrow wheel (cmake/TopspinHelpers.cmake
// topspin_find_pyarrow). docs/PARQUET.md has the user-facing details.
//
// Inputs are files or directories. A directory is read recursively, files
// in sorted path order, skipping names that begin with '_' or '.' (Spark's
// _SUCCESS, .crc files). A folder named key=value (hive-style partitioning)
// adds column `key` with that value (URL-unescaped, as Spark escapes it;
// __HIVE_DEFAULT_PARTITION__ is null) after the file's columns, int64 when
// every value of the key in the whole input is an integer, else string.
//
// Types: bool -> bool; int8/int16/int32/uint16 -> int32; uint8 -> uint8;
// int64/uint32/uint64 -> int64 (a uint64 above 2^63-1 is an error at its
// row); float16/float32 -> float32; float64 -> float64; string, large
// string, binary, dictionary<string> (and Parquet's dictionary encoding)
// -> string; list<integer> -> tokens_u32 (tokens_u16 with --columns
// name:tokens_u16). A null is a null. Any other type (timestamp, date,
// decimal, struct, map, list of non-integers) is Error kConfig naming the
// file and column, with a hint to cast it in Spark or leave it out with
// --columns. Every file must have the first file's columns and types:
// Error kData naming both files otherwise.
//
// ImportOptions::columns projects (names, in order; partition keys too);
// column_types override the mapping between compatible types (integers to
// any integer or float type, range-checked per row; floats to float32 or
// float64; lists to tokens_u16 or tokens_u32).
//
// Rows are read a record batch of chunk_rows at a time (row groups
// pre-buffered, columns decoded on Arrow's thread pool), and a chunk never
// spans files. Row ids (topspin/data/importer.h) are (input, row in file).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "topspin/data/column.h"
#include "topspin/data/importer.h"

namespace topspin {

// Makes OpenImporter (and so Convert) accept format "parquet".
void RegisterParquetImport();

// Writes `table` as a Parquet file (zstd level 3, row groups of
// `row_group_rows`): our dtypes as their Arrow equivalents (token columns as
// list<uint16|uint32>), nulls as nulls. For tests and `topspin bench`.
void WriteParquetFile(const std::filesystem::path& path, const Table& table,
                      int64_t row_group_rows = 65536);

}  // namespace topspin
