#include "topspin/core/config.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const Schema& S() {
  return TopspinSchema();
}

Config ParseText(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return Config::Parse(yaml, "test.yaml", overrides, S());
}

// Runs `fn`, expects a config Error, returns it.
template <typename F>
Error ExpectConfigError(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig) << e.Message();
    return e;
  }
  ADD_FAILURE() << "expected a config error";
  return InternalError("none");
}

TEST(Config, EmptyDocumentGivesDefaults) {
  const Config c = ParseText("");
  EXPECT_EQ(c.GetInt("pipeline.threads"), 4);
  EXPECT_EQ(c.GetString("pipeline.shuffle"), "block");
  EXPECT_TRUE(c.GetBool("pipeline.drop_last"));
  EXPECT_DOUBLE_EQ(c.GetFloat("optim.lr"), 1e-3);
  EXPECT_EQ(c.Origin("pipeline.threads").kind, ValueOrigin::Kind::kDefault);
}

TEST(Config, ReadsTypedValuesAndRecordsWhereTheyCameFrom) {
  const Config c = ParseText(
      "run:\n  seed: 7\npipeline:\n  threads: 8\n  shuffle: global\n  drop_last: false\n"
      "optim:\n  lr: 3e-4\n");
  EXPECT_EQ(c.GetInt("run.seed"), 7);
  EXPECT_EQ(c.GetInt("pipeline.threads"), 8);
  EXPECT_EQ(c.GetString("pipeline.shuffle"), "global");
  EXPECT_FALSE(c.GetBool("pipeline.drop_last"));
  EXPECT_DOUBLE_EQ(c.GetFloat("optim.lr"), 3e-4);
  EXPECT_EQ(c.Origin("pipeline.threads").Format(), "test.yaml:4");
  const PipelineConfig p = PipelineConfig::From(c);
  EXPECT_EQ(p.threads, 8);
  EXPECT_EQ(p.batch_size, 256);
}

TEST(Config, UnknownKeyNamesKeyLineAndLikelyIntendedKey) {
  const Error e = ExpectConfigError([] { ParseText("run:\n  seed: 1\npipeline:\n  thread: 8\n"); });
  EXPECT_EQ(e.where().file, "test.yaml");
  EXPECT_EQ(e.where().line, 4);
  EXPECT_EQ(e.where().field, "pipeline.thread");
  EXPECT_THAT(e.Message(), HasSubstr("test.yaml:4:3"));
  EXPECT_THAT(e.Message(), HasSubstr("unknown key"));
  EXPECT_THAT(e.Message(), HasSubstr("did you mean \"pipeline.threads\"?"));
}

TEST(Config, UnknownSectionSuggestsTheClosestSection) {
  const Error e = ExpectConfigError([] { ParseText("pipelin:\n  threads: 2\n"); });
  EXPECT_EQ(e.where().line, 1);
  EXPECT_THAT(e.hint(), HasSubstr("\"pipeline\""));
}

TEST(Config, KeyInTheWrongSectionPointsToTheRightOne) {
  const Error e = ExpectConfigError([] { ParseText("run:\n  batch_size: 32\n"); });
  EXPECT_THAT(e.hint(), HasSubstr("pipeline.batch_size"));
}

TEST(Config, WrongTypeIsAnErrorWithLineAndExpectedType) {
  const Error e = ExpectConfigError([] { ParseText("pipeline:\n  threads: many\n"); });
  EXPECT_EQ(e.where().line, 2);
  EXPECT_THAT(e.Message(), HasSubstr("expected int, got \"many\""));
  ExpectConfigError([] { ParseText("pipeline:\n  threads: 2.5\n"); });
  ExpectConfigError([] { ParseText("pipeline:\n  drop_last: maybe\n"); });
  ExpectConfigError([] { ParseText("optim:\n  lr: [1, 2]\n"); });
  ExpectConfigError([] { ParseText("pipeline: 3\n"); });
  ExpectConfigError([] { ParseText("- a\n- b\n"); });
}

TEST(Config, OutOfRangeIsAnErrorThatStatesTheRange) {
  const Error e = ExpectConfigError([] { ParseText("pipeline:\n  threads: 0\n"); });
  EXPECT_THAT(e.Message(), HasSubstr("between 1 and 256"));
  ExpectConfigError([] { ParseText("optim:\n  lr: -0.1\n"); });
  ExpectConfigError([] { ParseText("pipeline:\n  threads: 99999999999999999999\n"); });
}

TEST(Config, ChoicesAreCheckedWithASuggestion) {
  const Error e = ExpectConfigError([] { ParseText("pipeline:\n  shuffle: globl\n"); });
  EXPECT_THAT(e.Message(), HasSubstr("not one of: none, block, global"));
  EXPECT_THAT(e.hint(), HasSubstr("\"global\""));
}

TEST(Config, LayerWidthsAreIntegerListsCheckedOnLoad) {
  // A YAML list, or the comma-separated text of --set and of older configs.
  EXPECT_EQ(ParseText("model:\n  top: [256, 32]\n").GetIntList("model.top"),
            (std::vector<int64_t>{256, 32}));
  EXPECT_EQ(ParseText("model:\n  top: \" 128, 64\"\n").GetIntList("model.top"),
            (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(ParseText("model:\n  bottom: 8\n").GetIntList("model.bottom"),
            (std::vector<int64_t>{8}));
  EXPECT_TRUE(ParseText("model:\n  bottom: []\n").GetIntList("model.bottom").empty());
  EXPECT_TRUE(ParseText("model:\n  bottom: \"\"\n").GetIntList("model.bottom").empty());
  EXPECT_EQ(ParseText("", {"model.top=1024,512"}).GetIntList("model.top"),
            (std::vector<int64_t>{1024, 512}));
  EXPECT_EQ(ParseText("", {"model.top=[3, 2]"}).GetIntList("model.top"),
            (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(ParseText("").GetIntList("model.top"), (std::vector<int64_t>{128, 64}));
  EXPECT_THAT(ParseText("model:\n  top: [256, 32]\n").ToYaml(), HasSubstr("top: [256, 32]"));
  const std::pair<const char*, const char*> bad[] = {
      {"\"64,abc\"", "\"abc\" in \"64,abc\" is not an integer"},
      {"[64, abc]", "list item \"abc\" is not an integer"},
      {"0", "value 0 is out of range: must be between 1 and 1048576"},
      {"[8, -1]", "value -1 is out of range"},
      {"99999999999", "out of range"},
      {"\"64,,8\"", "\"\" in \"64,,8\" is not an integer"},
      {"[[1]]", "list items must be integers"},
      {"{a: 1}", "expected a list of ints"}};
  for (const auto& [text, message] : bad) {
    const Error e = ExpectConfigError([&] { ParseText(fmt::format("model:\n  top: {}\n", text)); });
    EXPECT_EQ(e.where().field, "model.top") << e.Message();
    EXPECT_EQ(e.where().line, 2) << e.Message();
    EXPECT_THAT(e.Message(), HasSubstr(message)) << text;
  }
  const Error e = ExpectConfigError([] { ParseText("", {"model.bottom=8,abc"}); });
  EXPECT_EQ(e.where().field, "model.bottom");
}

TEST(Config, LocateNamesTheLineThatSetTheKeyOfALaterError) {
  const Config c = ParseText("optim:\n  lr: 0.5\n", {"optim.name=sgd"});
  const Error located = c.Locate(ConfigError("too high", ErrorWhere{.field = "optim.lr"}));
  EXPECT_EQ(located.where().line, 2);
  EXPECT_THAT(located.Message(), HasSubstr("too high"));
  // Set by --set or left at its default, a file already named, another kind:
  // unchanged.
  EXPECT_FALSE(c.Locate(ConfigError("x", ErrorWhere{.field = "optim.name"})).where().line);
  EXPECT_FALSE(c.Locate(ConfigError("x", ErrorWhere{.field = "run.seed"})).where().line);
  EXPECT_EQ(c.Locate(ConfigError("x", ErrorWhere{.file = "d", .field = "optim.lr"})).where().file,
            "d");
  EXPECT_FALSE(c.Locate(DataError("x", ErrorWhere{.field = "optim.lr"})).where().line);
}

TEST(Config, DuplicateKeysAreAnError) {
  const Error e = ExpectConfigError([] { ParseText("pipeline:\n  threads: 2\n  threads: 3\n"); });
  EXPECT_EQ(e.where().line, 3);
  EXPECT_THAT(e.hint(), HasSubstr("line 2"));
}

TEST(Config, InvalidYamlNamesTheLine) {
  const Error e = ExpectConfigError([] { ParseText("pipeline:\n  threads: [1, 2\n"); });
  EXPECT_EQ(e.where().file, "test.yaml");
  EXPECT_TRUE(e.where().line.has_value());
}

TEST(Config, OverridesWinOverFileAndApplyInOrder) {
  const Config c = ParseText("pipeline:\n  threads: 8\n",
                             {"pipeline.threads=2", "optim.lr=0.5", "pipeline.threads=16"});
  EXPECT_EQ(c.GetInt("pipeline.threads"), 16);
  EXPECT_DOUBLE_EQ(c.GetFloat("optim.lr"), 0.5);
  EXPECT_EQ(c.Origin("pipeline.threads").kind, ValueOrigin::Kind::kOverride);
  EXPECT_EQ(c.Origin("pipeline.threads").Format(), "--set pipeline.threads=16");
}

TEST(Config, OverridesAreValidatedLikeTheFile) {
  const Error unknown = ExpectConfigError([] { ParseText("", {"pipeline.thread=2"}); });
  EXPECT_THAT(unknown.hint(), HasSubstr("pipeline.threads"));
  const Error range = ExpectConfigError([] { ParseText("", {"pipeline.threads=0"}); });
  EXPECT_EQ(range.where().field, "pipeline.threads");
  ExpectConfigError([] { ParseText("", {"pipeline.threads"}); });
  ExpectConfigError([] { ParseText("", {"=3"}); });
  // Quotes around a string value are removed; strings keep '=' inside.
  EXPECT_EQ(ParseText("", {"run.name='a=b'"}).GetString("run.name"), "a=b");
}

TEST(Config, HashIgnoresKeyOrderFormattingCommentsAndNumberSpelling) {
  const Config a = ParseText("pipeline:\n  threads: 8\n  shuffle: global\noptim:\n  lr: 0.001\n");
  const Config b = ParseText(
      "# tuned by hand\noptim: {lr: 1e-3}\npipeline:\n    shuffle: \"global\"   # quoted\n"
      "    threads: +8\n");
  EXPECT_EQ(a.Hash(), b.Hash());
  // Setting a key to its default means the same as leaving it out.
  EXPECT_EQ(ParseText("").Hash(), ParseText("pipeline:\n  threads: 4\n").Hash());
  // Keys that do not change results do not change the hash.
  EXPECT_EQ(ParseText("").Hash(), ParseText("run:\n  name: other\n  dir: /tmp/x\n").Hash());
  // Different meaning, different hash.
  EXPECT_NE(a.Hash(), ParseText("pipeline:\n  threads: 9\n").Hash());
  EXPECT_NE(ParseText("").Hash(), ParseText("run:\n  seed: 1\n").Hash());
  EXPECT_EQ(a.Hash().size(), 16u);
}

TEST(Config, HashIsStableAcrossBuildsAndMachines) {
  // Pinned: a change here changes every run's recorded config hash. Update
  // it only when the schema or the canonical form changes on purpose.
  const std::string canonical = ParseText("").CanonicalText();
  EXPECT_EQ(canonical.substr(0, 46), "data.train=\"\"\ndata.valid=\"\"\ndist.backend=auto\n");
  EXPECT_EQ(canonical.find("run.name"), std::string::npos);  // not hashed
}

TEST(Config, ToYamlRoundTripsToTheSameConfig) {
  const Config a =
      ParseText("pipeline:\n  threads: 8\nrun:\n  name: \"odd: name\"\noptim:\n  lr: 2\n",
                {"pipeline.shuffle=none"});
  const std::string yaml = a.ToYaml();
  EXPECT_THAT(yaml, HasSubstr("pipeline:\n  threads: 8\n"));
  EXPECT_THAT(yaml, HasSubstr("lr: 2.0\n"));
  const Config b = ParseText(yaml);
  EXPECT_EQ(b.Hash(), a.Hash());
  EXPECT_EQ(b.GetString("run.name"), "odd: name");
  EXPECT_THAT(a.ToYaml(true), HasSubstr("threads: 8  # test.yaml:2"));
  EXPECT_THAT(a.ToYaml(true), HasSubstr("# --set pipeline.shuffle=none"));
  // Only what was set, plus the noted keys (the tuner's output): the same
  // config again, with no default written out.
  const std::string set = a.ToYaml(true, {{"pipeline.prefetch", "tuned 2"}}, /*only_set=*/true);
  EXPECT_THAT(set, HasSubstr("pipeline:\n  threads: 8  # test.yaml:2\n"));
  EXPECT_THAT(set, HasSubstr("  prefetch: 4  # tuned 2\n"));
  EXPECT_THAT(set, Not(HasSubstr("data:")));
  EXPECT_EQ(ParseText(set).Hash(), a.Hash());
}

TEST(Config, LoadNamesAMissingFile) {
  try {
    Config::Load("/nonexistent/x.yaml", {}, S());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_THAT(e.Message(), HasSubstr("/nonexistent/x.yaml"));
  }
}

TEST(Config, LoadReadsAFile) {
  testing::TempDir dir;
  WriteFileAtomic(dir / "c.yaml", "pipeline:\n  prefetch: 9\n  bogus: 1\n");
  try {
    Config::Load(dir / "c.yaml", {}, S());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.Message(), HasSubstr((dir / "c.yaml").string() + ":3:3"));
  }
}

TEST(Schema, MarkdownListsEveryKeyWithItsDefault) {
  const std::string md = S().ToMarkdown();
  for (const auto& f : S().fields()) EXPECT_THAT(md, HasSubstr("`" + f.key + "`"));
  EXPECT_THAT(md, HasSubstr("| `pipeline.threads` | int | `4` | 1 .. 256 |"));
}

TEST(Schema, DefaultsSatisfyTheirOwnRanges) {
  for (const auto& f : S().fields()) {
    EXPECT_NO_THROW(Config::Defaults({f.key + "=" + FormatConfigValue(f.default_value)}, S()))
        << f.key;
  }
}

}  // namespace
}  // namespace topspin
