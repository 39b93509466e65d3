#include "topspin/data/dtype.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace topspin {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct DTypeFacts {
  DType dtype;
  uint8_t byte;  // the on-disk value: must never change
  const char* name;
  size_t width;
  bool numeric;
  bool variable_length;
};

const std::vector<DTypeFacts>& AllDTypes() {
  static const std::vector<DTypeFacts> facts = {
      {DType::kFloat32, 0, "float32", 4, true, false},
      {DType::kFloat64, 1, "float64", 8, true, false},
      {DType::kInt32, 2, "int32", 4, true, false},
      {DType::kInt64, 3, "int64", 8, true, false},
      {DType::kUInt8, 4, "uint8", 1, true, false},
      {DType::kBool, 5, "bool", 1, false, false},
      {DType::kString, 6, "string", 0, false, true},
      {DType::kTokensU16, 7, "tokens_u16", 2, false, true},
      {DType::kTokensU32, 8, "tokens_u32", 4, false, true},
  };
  return facts;
}

TEST(DType, OnDiskValuesAreStable) {
  ASSERT_EQ(AllDTypes().size(), static_cast<size_t>(kLastDType) + 1);
  for (const auto& f : AllDTypes()) {
    EXPECT_EQ(static_cast<uint8_t>(f.dtype), f.byte) << f.name;
  }
}

TEST(DType, NamesWidthsAndClasses) {
  for (const auto& f : AllDTypes()) {
    EXPECT_STREQ(DTypeName(f.dtype), f.name);
    EXPECT_EQ(FixedWidth(f.dtype), f.width) << f.name;
    EXPECT_EQ(IsNumeric(f.dtype), f.numeric) << f.name;
    EXPECT_EQ(IsVariableLength(f.dtype), f.variable_length) << f.name;
  }
}

TEST(DType, NameRoundTrips) {
  for (const auto& f : AllDTypes()) {
    EXPECT_EQ(ParseDType(f.name), f.dtype) << f.name;
    EXPECT_EQ(ParseDType(DTypeName(f.dtype)), f.dtype) << f.name;
  }
}

TEST(DType, AliasesParseToTheirCanonicalType) {
  EXPECT_EQ(ParseDType("float"), DType::kFloat32);
  EXPECT_EQ(ParseDType("double"), DType::kFloat64);
  EXPECT_EQ(ParseDType("int"), DType::kInt64);
  EXPECT_EQ(ParseDType("str"), DType::kString);
  EXPECT_EQ(ParseDType("bytes"), DType::kString);
}

TEST(DType, ByteRoundTripsAndInvalidBytes) {
  for (const auto& f : AllDTypes()) EXPECT_EQ(DTypeFromByte(f.byte), f.dtype) << f.name;
  for (int byte = AllDTypes().size(); byte <= 255; ++byte) {
    EXPECT_EQ(DTypeFromByte(static_cast<uint8_t>(byte)), std::nullopt) << byte;
  }
}

Error ExpectParseError(std::string_view name, const ErrorWhere& where = {}) {
  try {
    ParseDType(name, where);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "ParseDType(\"" << name << "\") did not throw";
  return InternalError("no error");
}

TEST(DType, UnknownNameSaysWhereAndSuggestsTheClosest) {
  const Error e = ExpectParseError("flaot32", ErrorWhere{.file = "schema.yaml", .field = "price"});
  EXPECT_EQ(e.kind(), ErrorKind::kConfig);
  EXPECT_EQ(e.where().field, "price");
  EXPECT_THAT(e.Message(), HasSubstr("schema.yaml: \"price\": unknown dtype \"flaot32\""));
  EXPECT_THAT(e.hint(), HasSubstr("did you mean \"float32\"?"));
  EXPECT_THAT(e.hint(), HasSubstr("valid dtypes: float32, float64, int32"));
}

TEST(DType, NamesAreCaseSensitiveButTheHintFindsThem) {
  EXPECT_THAT(ExpectParseError("Bool").hint(), HasSubstr("did you mean \"bool\"?"));
  EXPECT_THAT(ExpectParseError("tokens_u17").hint(), HasSubstr("did you mean \"tokens_u16\"?"));
}

TEST(DType, FarOffNamesListTheValidTypesWithoutAGuess) {
  const Error e = ExpectParseError("complex128");
  EXPECT_THAT(e.hint(), Not(HasSubstr("did you mean")));
  EXPECT_THAT(e.hint(), HasSubstr("tokens_u32"));
  EXPECT_EQ(ExpectParseError("").kind(), ErrorKind::kConfig);
}

}  // namespace
}  // namespace topspin
