#include "topspin/data/gen_shop.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;

ShopOptions Small(uint64_t queries, uint64_t seed = 7) {
  ShopOptions options;
  options.queries = queries;
  options.seed = seed;
  options.threads = 2;
  return options;
}

bool SameColumn(const Column& a, const Column& b) {
  return a.spec() == b.spec() && a.size() == b.size() &&
         std::ranges::equal(a.validity(), b.validity()) &&
         std::ranges::equal(a.values(), b.values());
}

double NullRate(const Table& table, const std::string& name) {
  const Column* column = table.Find(name);
  return static_cast<double>(column->null_count()) / static_cast<double>(column->size());
}

// Ranks with ties averaged (for Spearman's rho).
std::vector<double> Ranks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && values[order[j]] == values[order[i]]) ++j;
    for (size_t k = i; k < j; ++k) ranks[order[k]] = (i + j - 1) / 2.0;
    i = j;
  }
  return ranks;
}

double Pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

// Spearman's rho over the rows where both columns hold a value.
double Spearman(const Table& table, const std::string& a, const std::string& b) {
  std::vector<double> x, y;
  for (size_t r = 0; r < table.rows(); ++r) {
    if (!table.Find(a)->IsValid(r) || !table.Find(b)->IsValid(r)) continue;
    x.push_back(table.Find(a)->AsDouble(r));
    y.push_back(table.Find(b)->AsDouble(r));
  }
  return Pearson(Ranks(x), Ranks(y));
}

TEST(GenShop, SchemaHasQidLabelAndTheFeatures) {
  const std::vector<ColumnSpec> schema = ShopSchema();
  ASSERT_EQ(schema.size(), 30u);
  EXPECT_EQ(schema[0], (ColumnSpec{"qid", DType::kInt64}));
  EXPECT_EQ(schema[1], (ColumnSpec{"label", DType::kFloat32}));
  std::map<std::string, DType> types;
  for (const auto& spec : schema) types[spec.name] = spec.dtype;
  EXPECT_EQ(types.size(), schema.size()) << "duplicate column names";
  EXPECT_EQ(types["fast_shipping"], DType::kBool);
  EXPECT_EQ(types["sales_30d"], DType::kInt32);
  for (const char* id : {"brand", "category", "seller", "query_category"}) {
    EXPECT_EQ(types[id], DType::kInt64) << id;
  }
  const std::vector<std::string> features = ShopFeatureNames();
  ASSERT_EQ(features.size(), 28u);
  EXPECT_EQ(features.front(), "title_relevance");
  EXPECT_EQ(features.back(), "query_category");
  EXPECT_EQ(GenerateShopBlock(Small(3), 0, 3).schema(), schema);
}

TEST(GenShop, BlocksAreAPureFunctionOfSeedAndQuery) {
  const ShopOptions options = Small(40);
  const Table whole = GenerateShopBlock(options, 0, 40);
  Table parts = GenerateShopBlock(options, 0, 15);
  const Table rest = GenerateShopBlock(options, 15, 25);
  for (size_t r = 0; r < rest.rows(); ++r) parts.AppendRow(rest, r);
  ASSERT_EQ(parts.rows(), whole.rows());
  for (size_t c = 0; c < whole.columns.size(); ++c) {
    EXPECT_TRUE(SameColumn(whole.columns[c], parts.columns[c])) << whole.columns[c].name();
  }
  const Table other_seed = GenerateShopBlock(Small(40, 8), 0, 40);
  EXPECT_FALSE(SameColumn(whole.columns[2], other_seed.columns[2]));
}

TEST(GenShop, ListsHaveTheRequestedLengthsAndContiguousQids) {
  ShopOptions options = Small(300);
  options.min_list = 3;
  options.max_list = 9;
  const Table table = GenerateShopBlock(options, 100, 300);
  const auto qids = table.Find("qid")->Values<int64_t>();
  std::map<int64_t, int> lengths;
  for (size_t r = 0; r < qids.size(); ++r) {
    if (r > 0) {
      ASSERT_TRUE(qids[r] == qids[r - 1] || qids[r] == qids[r - 1] + 1) << "row " << r;
    }
    ++lengths[qids[r]];
  }
  ASSERT_EQ(lengths.size(), 300u);
  EXPECT_EQ(lengths.begin()->first, 100);
  std::map<int, int> histogram;
  for (const auto& [qid, length] : lengths) ++histogram[length];
  EXPECT_EQ(histogram.begin()->first, 3);
  EXPECT_EQ(histogram.rbegin()->first, 9);
  EXPECT_EQ(histogram.size(), 7u) << "every length 3..9 occurs";
}

TEST(GenShop, LabelsAreGradedAndSkewed) {
  const Table table = GenerateShopBlock(Small(2000), 0, 2000);
  const auto labels = table.Find("label")->Values<float>();
  std::vector<double> share(kShopLabels);
  for (float label : labels) {
    ASSERT_TRUE(label == 0 || label == 1 || label == 2 || label == 3 || label == 4) << label;
    share[static_cast<int>(label)] += 1.0 / static_cast<double>(labels.size());
  }
  EXPECT_GT(share[0], 0.4);
  EXPECT_LT(share[0], 0.6);
  EXPECT_GT(share[0] + share[1], 0.65);
  EXPECT_GT(share[4], 0.01);
  EXPECT_LT(share[4], 0.06);
  for (int l = 1; l < kShopLabels; ++l) EXPECT_LT(share[l], share[l - 1]) << "label " << l;
}

TEST(GenShop, RelevanceIsLearnableFromTheFeatures) {
  const Table table = GenerateShopBlock(Small(1500), 0, 1500);
  EXPECT_GT(Spearman(table, "label", "title_relevance"), 0.4);
  EXPECT_GT(Spearman(table, "label", "sales_30d"), 0.15);
  EXPECT_GT(Spearman(table, "label", "ctr"), 0.2);
  EXPECT_LT(Spearman(table, "label", "previous_position"), -0.1);
  EXPECT_LT(std::abs(Spearman(table, "label", "qid")), 0.05) << "qid carries no signal";
}

TEST(GenShop, NullsFollowTheirRules) {
  const Table table = GenerateShopBlock(Small(2000), 0, 2000);
  for (const char* dense : {"qid", "label", "title_relevance", "price", "sales_30d", "category",
                            "seller", "fast_shipping"}) {
    EXPECT_EQ(table.Find(dense)->null_count(), 0u) << dense;
  }
  EXPECT_NEAR(NullRate(table, "description_relevance"), 0.03, 0.01);
  EXPECT_NEAR(NullRate(table, "keywords_relevance"), 0.30, 0.02);
  EXPECT_NEAR(NullRate(table, "brand"), 0.12, 0.015);
  EXPECT_NEAR(NullRate(table, "previous_position"), 0.25, 0.02);
  EXPECT_NEAR(NullRate(table, "rating_avg"), 0.35, 0.05);
  const Column* rating = table.Find("rating_avg");
  const Column* count = table.Find("rating_count");
  const Column* reviews = table.Find("review_count");
  for (size_t r = 0; r < table.rows(); ++r) {
    ASSERT_EQ(rating->IsValid(r), count->AsDouble(r) > 0) << "row " << r;
    ASSERT_LE(reviews->AsDouble(r), count->AsDouble(r)) << "row " << r;
    if (rating->IsValid(r)) {
      ASSERT_TRUE(rating->AsDouble(r) >= 1 && rating->AsDouble(r) <= 5) << "row " << r;
    }
  }
}

TEST(GenShop, CsvIsIdenticalForAnyThreadCountAndParsesBack) {
  testing::TempDir dir;
  ShopOptions options = Small(600);  // several blocks
  options.threads = 1;
  const ShopWriteSummary one = WriteShopCsv(dir / "one.csv", options);
  options.threads = 3;
  WriteShopCsv(dir / "raw" / "three.csv", options);
  const std::string csv = ReadFile(dir / "one.csv");
  EXPECT_EQ(ReadFile(dir / "raw" / "three.csv"), csv);
  EXPECT_EQ(one.bytes, csv.size());
  EXPECT_EQ(one.queries, 600u);

  const Table table = GenerateShopBlock(options, 0, 600);
  EXPECT_EQ(one.rows, table.rows());
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(Split(line, ',').size(), 30u);
  EXPECT_THAT(line, HasSubstr("qid,label,title_relevance,"));
  size_t rows = 0, empty_fields = 0;
  while (std::getline(lines, line)) {
    const auto fields = Split(line, ',');
    ASSERT_EQ(fields.size(), 30u) << "line " << rows + 2;
    empty_fields += std::count(fields.begin(), fields.end(), "");
    if (rows == 0) {
      EXPECT_EQ(fields[0], "0");
      EXPECT_EQ(std::stof(fields[2]), table.Find("title_relevance")->Values<float>()[0]);
      EXPECT_TRUE(fields[20] == "true" || fields[20] == "false") << fields[20];
      EXPECT_THAT(fields[1], ::testing::MatchesRegex("[0-4]\\.0")) << "labels read as floats";
    }
    ++rows;
  }
  EXPECT_EQ(rows, table.rows());
  size_t nulls = 0;
  for (const auto& column : table.columns) nulls += column.null_count();
  EXPECT_EQ(empty_fields, nulls);
}

TEST(GenShop, LetorListsNonNullFeaturesInIndexOrder) {
  testing::TempDir dir;
  const ShopOptions options = Small(300);
  const ShopWriteSummary summary = WriteShopLetor(dir / "shop.txt", options);
  const Table table = GenerateShopBlock(options, 0, 300);
  std::istringstream lines(ReadFile(dir / "shop.txt"));
  std::string line;
  size_t row = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(row, table.rows());
    const auto parts = Split(line.substr(0, line.find(" # ")), ' ');
    EXPECT_EQ(std::stof(parts[0]), table.Find("label")->Values<float>()[row]);
    EXPECT_EQ(parts[1], fmt::format("qid:{}", table.Find("qid")->Values<int64_t>()[row]));
    size_t valid = 0;
    for (const auto& column : table.columns) valid += column.IsValid(row) ? 1 : 0;
    ASSERT_EQ(parts.size(), valid) << line;  // label + qid + one per non-null feature
    int previous = 0;
    for (size_t k = 2; k < parts.size(); ++k) {
      const int index = std::stoi(parts[k].substr(0, parts[k].find(':')));
      ASSERT_GT(index, previous);
      ASSERT_LE(index, 28);
      previous = index;
    }
    EXPECT_THAT(line, HasSubstr(" # "));
    ++row;
  }
  EXPECT_EQ(row, table.rows());
  EXPECT_EQ(summary.rows, table.rows());
}

TEST(GenShop, ShardsHoldEveryRowWithLabelAndGroup) {
  testing::TempDir dir;
  const ShopOptions options = Small(500);
  DatasetWriterOptions writer;
  writer.row_group_rows = 4096;
  const Manifest manifest = WriteShopShards(dir / "shop", options, writer);
  const Table table = GenerateShopBlock(options, 0, 500);
  EXPECT_EQ(manifest.rows(), table.rows());
  EXPECT_EQ(manifest.label_column, "label");
  EXPECT_EQ(manifest.group_column, "qid");
  EXPECT_EQ(manifest.schema, ShopSchema());
  EXPECT_EQ(manifest.group_stats.groups, 500u);
  const DatasetReader reader(dir / "shop");
  reader.Verify();
  EXPECT_EQ(reader.manifest().rows(), table.rows());
}

TEST(GenShop, BadOptionsNameTheField) {
  ShopOptions options;
  options.min_list = 0;
  try {
    GenerateShopBlock(options, 0, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_EQ(e.where().field, "min_list");
  }
  options.min_list = 10;
  options.max_list = 5;
  EXPECT_THROW(ValidateShopOptions(options), Error);
}

}  // namespace
}  // namespace topspin
