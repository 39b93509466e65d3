#include "data/gen_shop_columns.h"

#include <cmath>

#include "topspin/data/gen_shop.h"

namespace topspin {
namespace shop_internal {
namespace {

const std::array<ColumnSpec, kShopColumns>& Specs() {
  static const std::array<ColumnSpec, kShopColumns> specs = {{
      {"qid", DType::kInt64},
      {"label", DType::kFloat32},
      {"title_relevance", DType::kFloat32},
      {"description_relevance", DType::kFloat32},
      {"keywords_relevance", DType::kFloat32},
      {"photos_count", DType::kInt32},
      {"description_length", DType::kInt32},
      {"sales_7d", DType::kInt32},
      {"sales_30d", DType::kInt32},
      {"sales_stability", DType::kFloat32},
      {"out_of_stock_days", DType::kInt32},
      {"rating_avg", DType::kFloat32},
      {"rating_count", DType::kInt32},
      {"review_count", DType::kInt32},
      {"external_traffic", DType::kFloat32},
      {"ctr", DType::kFloat32},
      {"conversion_rate", DType::kFloat32},
      {"price", DType::kFloat32},
      {"discount", DType::kFloat32},
      {"delivery_days", DType::kInt32},
      {"fast_shipping", DType::kBool},
      {"seller_rating", DType::kFloat32},
      {"seller_age_days", DType::kInt32},
      {"return_rate", DType::kFloat32},
      {"listing_age_days", DType::kInt32},
      {"previous_position", DType::kInt32},
      {"brand", DType::kInt64},
      {"category", DType::kInt64},
      {"seller", DType::kInt64},
      {"query_category", DType::kInt64},
  }};
  return specs;
}

}  // namespace

const ColumnSpec& ShopColumnSpec(int c) {
  return Specs()[c];
}

void AppendShopRow(const ShopRow& row, Table& table) {
  for (int c = 0; c < kShopColumns; ++c) {
    Column& column = table.columns[c];
    const double v = row[c];
    if (std::isnan(v)) {
      column.AppendNull();
    } else if (column.dtype() == DType::kFloat32) {
      column.AppendFloat(v);
    } else {
      column.AppendInt(static_cast<int64_t>(v));
    }
  }
}

}  // namespace shop_internal

std::vector<ColumnSpec> ShopSchema() {
  std::vector<ColumnSpec> schema;
  for (int c = 0; c < shop_internal::kShopColumns; ++c) {
    schema.push_back(shop_internal::ShopColumnSpec(c));
  }
  return schema;
}

std::vector<std::string> ShopFeatureNames() {
  std::vector<std::string> names;
  for (int c = shop_internal::kFirstFeature; c < shop_internal::kShopColumns; ++c) {
    names.push_back(shop_internal::ShopColumnSpec(c).name);
  }
  return names;
}

}  // namespace topspin
