#include "data/column_buffer.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

// The same rows through Column's own appends, for comparison.
void ExpectSameColumn(const Column& a, const Column& b) {
  EXPECT_EQ(a.spec(), b.spec());
  EXPECT_EQ(a.size(), b.size());
  EXPECT_EQ(a.null_count(), b.null_count());
  EXPECT_TRUE(std::ranges::equal(a.validity(), b.validity()));
  EXPECT_TRUE(std::ranges::equal(a.values(), b.values()));
  EXPECT_TRUE(std::ranges::equal(a.offsets(), b.offsets()));
}

TEST(ColumnBuffer, BuildsTheSameBuffersAsColumnAppends) {
  ColumnBuffer f({"f", DType::kFloat32});
  Column want_f({"f", DType::kFloat32});
  ColumnBuffer s({"s", DType::kString});
  Column want_s({"s", DType::kString});
  for (int i = 0; i < 20; ++i) {
    if (i % 7 == 3) {
      f.AppendNull();
      want_f.AppendNull();
      s.AppendNull();
      want_s.AppendNull();
    } else {
      f.AppendFixed(static_cast<float>(i) / 2);
      want_f.AppendFloat(static_cast<float>(i) / 2);
      s.AppendString(std::string(static_cast<size_t>(i), 'x'));
      want_s.AppendString(std::string(static_cast<size_t>(i), 'x'));
    }
  }
  const Column got_f = f.Build();
  ExpectSameColumn(got_f, want_f);
  ExpectSameColumn(s.Build(), want_s);
  EXPECT_TRUE(std::isnan(got_f.Values<float>()[3]));
  EXPECT_EQ(f.size(), 0u);  // Build leaves the buffer empty and usable
}

TEST(ColumnBuffer, TruncateRollsBackRowsAndTheirNulls) {
  ColumnBuffer b({"i", DType::kInt64});
  b.AppendFixed<int64_t>(1);
  b.AppendFixed<int64_t>(2);
  b.AppendNull();  // the first null materialises the bitmap
  b.Truncate(2);
  b.AppendFixed<int64_t>(3);
  Column want({"i", DType::kInt64});
  for (int64_t v : {1, 2, 3}) want.AppendInt(v);
  ExpectSameColumn(b.Build(), want);  // no bitmap left: no nulls

  ColumnBuffer s({"s", DType::kString});
  s.AppendString("keep");
  s.AppendNull();
  s.AppendString("drop");
  s.Truncate(2);
  const Column got = s.Build();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got.StringAt(0), "keep");
  EXPECT_FALSE(got.IsValid(1));
  EXPECT_EQ(got.values().size(), 4u);
}

TEST(ColumnBuffer, AppendRowsConcatenatesSlices) {
  ColumnBuffer a({"s", DType::kString});
  for (int i = 0; i < 10; ++i) {
    if (i == 4) {
      a.AppendNull();
    } else {
      a.AppendString(std::to_string(i));
    }
  }
  ColumnBuffer out({"s", DType::kString});
  out.AppendString("first");
  out.AppendRows(a, 3, 6);
  out.AppendRows(a, 9, 10);
  out.AppendRows(a, 5, 5);  // empty
  Column want({"s", DType::kString});
  want.AppendString("first");
  want.AppendString("3");
  want.AppendNull();
  want.AppendString("5");
  want.AppendString("9");
  ExpectSameColumn(out.Build(), want);

  ColumnBuffer d({"d", DType::kFloat64});
  EXPECT_THROW(d.AppendRows(a, 0, 1), Error);  // another dtype: a caller bug
}

}  // namespace
}  // namespace topspin
