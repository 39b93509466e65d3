// The shop generator's columns (internal to the data module; meanings in
// topspin/data/gen_shop.h). A generated row is a fixed array of doubles,
// NaN for null, appended to a Table column by column.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "topspin/data/column.h"

namespace topspin::shop_internal {

// Schema order: the LETOR feature index of column c is c - 1.
enum ShopColumn : int {
  kQid,
  kLabel,
  kTitleRelevance,
  kDescriptionRelevance,
  kKeywordsRelevance,
  kPhotosCount,
  kDescriptionLength,
  kSales7d,
  kSales30d,
  kSalesStability,
  kOutOfStockDays,
  kRatingAvg,
  kRatingCount,
  kReviewCount,
  kExternalTraffic,
  kCtr,
  kConversionRate,
  kPrice,
  kDiscount,
  kDeliveryDays,
  kFastShipping,
  kSellerRating,
  kSellerAgeDays,
  kReturnRate,
  kListingAgeDays,
  kPreviousPosition,
  kBrand,
  kCategory,
  kSeller,
  kQueryCategory,
  kShopColumns,  // the count
};

inline constexpr int kFirstFeature = kTitleRelevance;

using ShopRow = std::array<double, kShopColumns>;

// Name and type of column `c`.
const ColumnSpec& ShopColumnSpec(int c);

// Appends `row` to `table` (which has ShopSchema()): NaN -> null, integers
// and bools from their double value.
void AppendShopRow(const ShopRow& row, Table& table);

}  // namespace topspin::shop_internal
