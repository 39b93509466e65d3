#include "topspin/data/manifest.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

using Json = nlohmann::json;

ColumnStats SomeStats(uint64_t rows, uint64_t nulls) {
  ColumnStats s;
  s.count = rows;
  s.nulls = nulls;
  if (nulls == rows) return s;
  s.min = -1.5;
  s.max = 0.1 + 0.2;  // not exactly representable: round trip must be exact
  s.mean = 1.0 / 3;
  s.std = 0.25;
  for (int i = 0; i < kQuantileEdges; ++i) s.quantiles.push_back(-1.5 + i * 0.0283);
  return s;
}

Manifest SampleManifest() {
  Manifest m;
  m.schema = {{"label", DType::kFloat32}, {"qid", DType::kInt64}, {"title", DType::kString}};
  m.label_column = "label";
  m.group_column = "qid";
  m.created_by = "topspin 0.1.0 test";
  m.shards = {{"shard-00000.tshard", 100, 10, 2, 4000, 5000, std::string(64, 'a')},
              {"shard-00001.tshard", 50, 5, 1, 2000, 2500, std::string(64, 'b')}};
  m.group_stats = {15, 1, 30, 10.0};
  m.stats["label"] = SomeStats(150, 0);
  m.stats["qid"] = SomeStats(150, 0);
  m.stats["title"] = SomeStats(150, 150);
  return m;
}

// FromJson of SampleManifest() after `edit`; returns the error message.
std::string ErrorAfterEdit(const std::function<void(Json&)>& edit) {
  Json j = Json::parse(SampleManifest().ToJson());
  edit(j);
  try {
    Manifest::FromJson(j.dump(), "data/train/manifest.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
    EXPECT_EQ(e.where().file, "data/train/manifest.json");
    return e.Message();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

void ExpectSameStats(const ColumnStats& a, const ColumnStats& b) {
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.nulls, b.nulls);
  EXPECT_EQ(a.min, b.min);
  EXPECT_EQ(a.max, b.max);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.std, b.std);
  EXPECT_EQ(a.quantiles, b.quantiles);
}

TEST(Manifest, RoundTripsExactly) {
  const Manifest m = SampleManifest();
  const std::string text = m.ToJson();
  const Manifest back = Manifest::FromJson(text, "m.json");
  EXPECT_EQ(back.version, kManifestVersion);
  EXPECT_EQ(back.schema, m.schema);
  EXPECT_EQ(back.label_column, "label");
  EXPECT_EQ(back.group_column, "qid");
  EXPECT_EQ(back.created_by, m.created_by);
  EXPECT_TRUE(back.tokenizer.empty());  // not written when unknown
  EXPECT_EQ(text.find("tokenizer"), std::string::npos);
  Manifest text_data = m;
  text_data.tokenizer = "bytes";
  EXPECT_EQ(Manifest::FromJson(text_data.ToJson(), "t.json").tokenizer, "bytes");
  ASSERT_EQ(back.shards.size(), 2u);
  EXPECT_EQ(back.shards[1].file, "shard-00001.tshard");
  EXPECT_EQ(back.shards[1].sha256, std::string(64, 'b'));
  EXPECT_EQ(back.rows(), 150u);
  EXPECT_EQ(back.bytes(), 6000u);
  EXPECT_EQ(back.raw_bytes(), 7500u);
  EXPECT_EQ(back.row_groups(), 3u);
  EXPECT_EQ(back.group_stats.groups, 15u);
  EXPECT_EQ(back.group_stats.max_length, 30u);
  for (const auto& [name, s] : m.stats) ExpectSameStats(back.stats.at(name), s);
  EXPECT_EQ(back.ToJson(), text) << "serialization is stable";
}

TEST(Manifest, NonFiniteStatsSurviveAsStrings) {
  Manifest m = SampleManifest();
  m.stats["label"].min = -std::numeric_limits<double>::infinity();
  m.stats["label"].quantiles.front() = -std::numeric_limits<double>::infinity();
  m.stats["label"].max = std::numeric_limits<double>::infinity();
  m.stats["label"].quantiles.back() = std::numeric_limits<double>::infinity();
  m.stats["label"].mean = std::nan("");
  const std::string text = m.ToJson();
  EXPECT_NE(text.find("\"-inf\""), std::string::npos);
  const Manifest back = Manifest::FromJson(text, "m.json");
  EXPECT_TRUE(std::isinf(back.stats.at("label").min));
  EXPECT_TRUE(std::isnan(back.stats.at("label").mean));
}

TEST(Manifest, SchemaDifferencesNameEachColumn) {
  const std::vector<ColumnSpec> train = {
      {"qid", DType::kInt64}, {"label", DType::kFloat32}, {"f1", DType::kFloat32}};
  EXPECT_EQ(DescribeSchemaDifference(train, train), "");
  const std::vector<ColumnSpec> valid = {
      {"qid", DType::kInt32}, {"label", DType::kFloat32}, {"f2", DType::kFloat32}};
  EXPECT_EQ(DescribeSchemaDifference(valid, train),
            "column \"qid\" is int32 here and int64 in the reference; column \"f1\" is missing; "
            "column \"f2\" is extra");
  const std::vector<ColumnSpec> swapped = {train[1], train[0], train[2]};
  EXPECT_EQ(DescribeSchemaDifference(swapped, train), "the columns are in another order");
}

TEST(Manifest, ErrorsNameTheFieldAndTheFile) {
  EXPECT_NE(ErrorAfterEdit([](Json& j) {
              j["shards"][1]["sha256"] = "xyz";
            }).find("data/train/manifest.json: \"shards[1].sha256\""),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) { j["version"] = 7; }).find("newer topspin"),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) {
              j["schema"][2]["dtype"] = "strng";
            }).find("\"schema[2].dtype\""),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) { j["label_column"] = "y"; }).find("not in the schema"),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) {
              j["schema"][1]["dtype"] = "float32";
            }).find("must be int64 or string"),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) { j["rows"] = 151; }).find("add up to 150"),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) { j["shards"][0]["rows"] = -3; }).find("shards[0].rows"),
            std::string::npos);
  EXPECT_NE(
      ErrorAfterEdit([](Json& j) { j["stats"]["qid"]["count"] = 149; }).find("\"stats.qid.count\""),
      std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) { j["stats"].erase("title"); }).find("stats.title"),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) {
              j["stats"]["label"]["quantiles"][5] = 99;
            }).find("stats.label.quantiles[6]"),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) { j["group_stats"]["groups"] = 14; }).find("group_stats"),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) {
              j["shards"][1]["file"] = "../etc/passwd";
            }).find("shards[1].file"),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) {
              j["shards"][1]["file"] = "shard-00000.tshard";
            }).find("listed twice"),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) { j["shards"][0]["groups"] = 0; }).find("shards[0].groups"),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) { j["sahrds"] = j["shards"]; }).find("did you mean"),
            std::string::npos);
  EXPECT_NE(ErrorAfterEdit([](Json& j) { j.erase("created_by"); }).find("missing required"),
            std::string::npos);
}

TEST(Manifest, MalformedJsonGivesTheByteOffset) {
  try {
    Manifest::FromJson("{\"format\": ", "m.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
    EXPECT_TRUE(e.where().byte_offset.has_value());
  }
  EXPECT_THROW(Manifest::FromJson("[1, 2]", "m.json"), Error);
  EXPECT_THROW(Manifest::FromJson("{\"format\": \"other\"}", "m.json"), Error);
}

TEST(Manifest, LoadReadsTheDirectoryAndExplainsAMissingOne) {
  testing::TempDir dir;
  WriteFileAtomic(dir / kManifestFile, SampleManifest().ToJson());
  EXPECT_EQ(Manifest::Load(dir.path()).rows(), 150u);

  std::filesystem::create_directories(dir / "half.incomplete");
  try {
    Manifest::Load(dir / "half");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(e.hint().find("interrupted"), std::string::npos) << e.Message();
  }
  std::filesystem::create_directories(dir / "empty");
  EXPECT_THROW(Manifest::Load(dir / "empty"), Error);
}

}  // namespace
}  // namespace topspin
