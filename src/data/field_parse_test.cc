#include "data/field_parse.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace topspin {
namespace {

template <typename T>
void ExpectSameAsFromChars(const std::string& text) {
  T fast = 0, reference = 0;
  const char* stop = nullptr;
  const char* end = text.data() + text.size();
  if (!ParseSimpleDecimal(text.data(), end, &fast, &stop)) return;  // not its case
  const auto [ptr, ec] = std::from_chars(text.data(), end, reference);
  ASSERT_EQ(ec, std::errc()) << text;
  EXPECT_EQ(stop, ptr) << text;
  EXPECT_EQ(std::memcmp(&fast, &reference, sizeof(T)), 0) << text;  // bit for bit, -0 too
}

TEST(FieldParse, SimpleDecimalsRoundExactlyLikeFromChars) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const int int_digits = static_cast<int>(rng() % 9);
    const int frac_digits = static_cast<int>(rng() % 12);
    std::string text = rng() % 4 == 0 ? "-" : "";
    for (int d = 0; d < int_digits; ++d) text += static_cast<char>('0' + rng() % 10);
    if (frac_digits > 0) {
      text += '.';
      for (int d = 0; d < frac_digits; ++d) text += static_cast<char>('0' + rng() % 10);
    }
    ExpectSameAsFromChars<float>(text);
    ExpectSameAsFromChars<double>(text);
  }
  for (const char* text : {"0", "-0", "16777216", "16777217", "0.1", "3.4028235", "5.", ".5",
                           "9007199254740993", "1234567.8"}) {
    ExpectSameAsFromChars<float>(text);
    ExpectSameAsFromChars<double>(text);
  }
}

TEST(FieldParse, SimpleDecimalsLeaveTheRestToFromChars) {
  float f = 0;
  const char* stop = nullptr;
  for (std::string_view text : {"1e5", "nan", "inf", "", "-", ".", "+1", "123456789012345678901"}) {
    EXPECT_FALSE(ParseSimpleDecimal(text.data(), text.data() + text.size(), &f, &stop)) << text;
  }
  std::string_view text = "12.5,x";
  ASSERT_TRUE(ParseSimpleDecimal(text.data(), text.data() + text.size(), &f, &stop));
  EXPECT_EQ(f, 12.5f);
  EXPECT_EQ(*stop, ',');
}

TEST(FieldParse, NumbersAndBools) {
  int64_t i = 0;
  EXPECT_TRUE(ParseInt64("+42", &i));
  EXPECT_EQ(i, 42);
  EXPECT_FALSE(ParseInt64("4 2", &i));
  EXPECT_FALSE(ParseInt64("9223372036854775808", &i));
  float f = 0;
  EXPECT_TRUE(ParseFloat32("1e-50", &f));  // underflow rounds to zero
  EXPECT_EQ(f, 0.0f);
  EXPECT_FALSE(ParseFloat32("1e50", &f));  // overflow is an error
  EXPECT_TRUE(ParseFloat32("NaN", &f));
  EXPECT_TRUE(std::isnan(f));
  bool b = false;
  EXPECT_TRUE(ParseBool("TRUE", false, &b));
  EXPECT_TRUE(b);
  EXPECT_FALSE(ParseBool("1", false, &b));
  EXPECT_TRUE(ParseBool("0", true, &b));
  EXPECT_FALSE(b);
  EXPECT_EQ(TrimBlanks(" \t x y \t"), "x y");
}

TEST(FieldParse, Utf8Validation) {
  EXPECT_EQ(InvalidUtf8Offset("plain ascii, long enough for the word loop"), std::string::npos);
  EXPECT_EQ(InvalidUtf8Offset("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), std::string::npos);
  EXPECT_EQ(InvalidUtf8Offset("caf\xE9"), 3u);            // latin-1
  EXPECT_EQ(InvalidUtf8Offset("abcdefgh\xC0\x80"), 8u);   // overlong NUL
  EXPECT_EQ(InvalidUtf8Offset("\xED\xA0\x80"), 0u);       // surrogate
  EXPECT_EQ(InvalidUtf8Offset("x\xF4\x90\x80\x80"), 1u);  // above U+10FFFF
  EXPECT_EQ(InvalidUtf8Offset("ok\xE2\x82"), 2u);         // truncated
  EXPECT_EQ(InvalidUtf8Offset("\xE0\x9F\xBF"), 0u);       // overlong 3-byte
}

TEST(FieldParse, QuoteForMessageEscapesAndTruncates) {
  EXPECT_EQ(QuoteForMessage("a\"b\n\xFF"), "\"a\\\"b\\x0a\\xff\"");
  EXPECT_EQ(QuoteForMessage(std::string(50, 'x'), 3), "\"xxx\"...");
}

}  // namespace
}  // namespace topspin
