#include "topspin/pipeline/shop_features.h"

#include <algorithm>

#include <fmt/format.h>

#include "topspin/data/gen_shop.h"

namespace topspin {

const std::vector<std::string>& ShopHeavyTailedColumns() {
  static const std::vector<std::string> columns = {
      "description_length", "sales_7d",        "sales_30d",
      "out_of_stock_days",  "rating_count",    "review_count",
      "external_traffic",   "seller_age_days", "listing_age_days"};
  return columns;
}

const std::vector<std::string>& ShopCategoricalColumns() {
  static const std::vector<std::string> columns = {"brand", "category", "seller", "query_category"};
  return columns;
}

std::vector<std::string> ShopDenseChains() {
  const auto& heavy = ShopHeavyTailedColumns();
  const auto& categorical = ShopCategoricalColumns();
  std::vector<std::string> chains;
  for (const auto& name : ShopFeatureNames()) {
    if (std::find(categorical.begin(), categorical.end(), name) != categorical.end()) continue;
    const bool log = std::find(heavy.begin(), heavy.end(), name) != heavy.end();
    chains.push_back(fmt::format("{}: impute(mean, flag) | {}standardize | clip(-5, 5)", name,
                                 log ? "log1p | " : ""));
  }
  return chains;
}

std::vector<std::string> ShopSparseChains() {
  std::vector<std::string> chains = {fmt::format("price: bucketize({})", kShopBuckets),
                                     fmt::format("delivery_days: bucketize({})", kShopBuckets)};
  for (const auto& name : ShopCategoricalColumns()) {
    chains.push_back(fmt::format("{}: hash({})", name, kShopHashSlots));
  }
  return chains;
}

}  // namespace topspin
