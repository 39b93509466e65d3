// Synthetic product-search logs for learning to rank ("shop").
//
// Each query shows a list of min_list..max_list products (uniform length)
// with the features a marketplace ranker uses, and a graded label 0..4
// computed by a hidden relevance function of those features plus noise
// (about 50% 0, 27% 1, 13% 2, 7% 3, 3% 4). Categories, brands and sellers
// have Zipf-skewed popularity; a category fixes its price level, a brand
// its quality, a seller its rating, age and shipping speed, so the ids
// carry signal for embeddings. Text relevance, sales, ratings, price and
// shipping speed all move the label; title relevance most.
//
// Columns, in schema order (LETOR feature index in brackets; qid and label
// are not features). Float columns are float32, counts int32, ids int64.
//   qid                    int64   query id: 0..queries-1 (the group)
//   label                  float32 graded relevance 0, 1, 2, 3 or 4
//   [1] title_relevance    BM25-like score of the title, >= 0
//   [2] description_relevance   same for the description; null (3%) when
//                          the listing has no description
//   [3] keywords_relevance same for the seller's backend keywords; null
//                          (30%) when the seller gave none
//   [4] photos_count       int32 1..24
//   [5] description_length int32 characters; 0 without a description
//   [6] sales_7d           int32 units sold in 7 days (heavy-tailed)
//   [7] sales_30d          int32 units sold in 30 days (lognormal tail)
//   [8] sales_stability    0..1, 1 = steady week to week; null when
//                          sales_30d == 0 (~30%)
//   [9] out_of_stock_days  int32 0..30 in the last 30 days (mostly 0)
//   [10] rating_avg        1..5; null when rating_count == 0 (~35%)
//   [11] rating_count      int32 (heavy-tailed)
//   [12] review_count      int32 <= rating_count
//   [13] external_traffic  visits per day from outside the shop; null (8%)
//                          when tracking is off
//   [14] ctr               click-through rate; null for listings younger
//                          than 14 days and 5% others (too few impressions)
//   [15] conversion_rate   orders per click; null when ctr is null
//   [16] price             currency units, lognormal around the category's
//                          price level
//   [17] discount          fraction off, 0..0.5 (70% 0)
//   [18] delivery_days     int32 1..30
//   [19] fast_shipping     bool (LETOR and CSV: see below)
//   [20] seller_rating     1..5; null for sellers younger than 90 days (~5%)
//   [21] seller_age_days   int32
//   [22] return_rate       0..1; null when sales_30d < 3 (~50%)
//   [23] listing_age_days  int32 0..3650
//   [24] previous_position int32 1..200; null (25%) when never shown
//   [25] brand             int64 0..4999 (0 most popular); null (12%) for
//                          unbranded products
//   [26] category          int64 0..299 (Zipf); usually query_category
//   [27] seller            int64 0..19999 (Zipf)
//   [28] query_category    int64 0..299, the same for a whole query
//
// Determinism: the rows of query q are a pure function of (seed, q,
// min_list, max_list): independent of threads, block boundaries and the
// output format (given the same libm, whose exp/log/sin results they use).
// Random streams: PhiloxStream(seed, q) for query q, and
// PhiloxStream(seed, kind << 56 | id) for the fixed attributes of a
// category, brand or seller (kind 1, 2, 3).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "topspin/data/column.h"
#include "topspin/data/dataset.h"
#include "topspin/data/manifest.h"

namespace topspin {

struct ShopOptions {
  uint64_t queries = 1000;
  uint64_t seed = 1;
  int min_list = 8;   // products per query, at least 1
  int max_list = 64;  // at most kShopMaxList
  int threads = 0;    // writers' generation threads; 0: hardware threads. Never changes output.
};

inline constexpr int kShopMaxList = 1000;
inline constexpr int kShopLabels = 5;  // labels 0..4

// Throws Error{kConfig} naming the field when options are out of range.
void ValidateShopOptions(const ShopOptions& options);

// The columns above, in order.
std::vector<ColumnSpec> ShopSchema();
// The feature columns (schema minus qid and label): LETOR index i + 1 is
// ShopFeatureNames()[i].
std::vector<std::string> ShopFeatureNames();

// Queries first_query .. first_query + num_queries - 1 (query ids below
// 2^48), all their rows, one query after another. options.queries is not
// consulted. Thread-safe (pure; the per-seed catalog of categories, brands
// and sellers is built once and shared).
Table GenerateShopBlock(const ShopOptions& options, uint64_t first_query, uint64_t num_queries);

// Called on the writer's thread after each block with the queries written
// so far (for a progress display).
using ShopProgressFn = std::function<void(uint64_t queries_done)>;

struct ShopWriteSummary {
  uint64_t queries = 0;
  uint64_t rows = 0;
  uint64_t bytes = 0;  // file size (text writers)
};

// CSV with a header row (the column names), RFC 4180, LF line ends. A null
// is an empty field; floats are written in shortest round-trip form and
// always with a point or exponent ("3.0"), so `topspin convert` infers
// float32 for every float column; bools are true/false (int32 columns come
// back as int64 unless --columns says otherwise). Written atomically;
// parent directories are created.
ShopWriteSummary WriteShopCsv(const std::filesystem::path& path, const ShopOptions& options,
                              const ShopProgressFn& progress = {});

// LETOR / SVMlight text: "label qid:Q 1:v 2:v ... # Q-P" per row (P the
// product's position in the list, from 0), feature indices as listed above,
// nulls omitted, bools as 1/0, ids as plain numbers. Written atomically.
ShopWriteSummary WriteShopLetor(const std::filesystem::path& path, const ShopOptions& options,
                                const ShopProgressFn& progress = {});

// A dataset directory (shards + manifest.json) at `dir` via DatasetWriter.
// `writer` supplies shard size, compression and threads; its out, schema,
// label_column ("label") and group_column ("qid") are set here.
Manifest WriteShopShards(const std::filesystem::path& dir, const ShopOptions& options,
                         DatasetWriterOptions writer = {}, const ShopProgressFn& progress = {});

}  // namespace topspin
