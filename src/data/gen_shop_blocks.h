// Parallel, in-order block generation for the shop writers (internal to
// the data module).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "topspin/data/column.h"
#include "topspin/data/gen_shop.h"

namespace topspin::shop_internal {

// Queries per block: ~9k rows at the default list lengths.
inline constexpr uint64_t kQueriesPerBlock = 256;

struct ShopBlock {
  uint64_t first_query = 0;
  uint64_t num_queries = 0;
  Table table;       // GenerateShopBlock's rows
  std::string text;  // whatever `prepare` makes of them (formatted lines)
};

// Generates all of options.queries in blocks on options.threads threads. For
// each block, `prepare` (may be empty) runs on the generating thread, then
// `consume` on the calling thread, blocks in query order; `progress` (may be
// empty) follows each consume. At most 2 blocks per thread are in memory.
// An exception from any of them is re-raised here.
void RunShopBlocks(const ShopOptions& options, const std::function<void(ShopBlock&)>& prepare,
                   const std::function<void(ShopBlock&)>& consume, const ShopProgressFn& progress);

}  // namespace topspin::shop_internal
