// The "shop transform" feature set for `gen shop` data: what the ranker
// demo trains on and what `topspin bench pipeline` measures.
//   dense  every numeric feature: impute(mean, flag) | [log1p for heavy-
//          tailed counts] | standardize | clip(-5, 5)   (24 x 2 = 48 floats)
//   sparse bucketize(16) of price and delivery_days; hash(2^18) of brand,
//          category, seller and query_category            (6 ids)
#pragma once

#include <string>
#include <vector>

namespace topspin {

inline constexpr unsigned kShopHashSlots = 1u << 18;
inline constexpr int kShopBuckets = 16;

// Columns of gen shop data whose long right tails log1p compresses.
const std::vector<std::string>& ShopHeavyTailedColumns();
// The categorical id columns (hashed).
const std::vector<std::string>& ShopCategoricalColumns();
// Chains as pipeline.dense / pipeline.sparse entries.
std::vector<std::string> ShopDenseChains();
std::vector<std::string> ShopSparseChains();

}  // namespace topspin
