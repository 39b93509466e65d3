#include "data/gen_shop_blocks.h"

#include <deque>
#include <future>

#include "topspin/core/thread_pool.h"

namespace topspin::shop_internal {

void RunShopBlocks(const ShopOptions& options, const std::function<void(ShopBlock&)>& prepare,
                   const std::function<void(ShopBlock&)>& consume, const ShopProgressFn& progress) {
  ValidateShopOptions(options);
  ThreadPool pool(static_cast<size_t>(std::max(0, options.threads)));
  const size_t window = 2 * pool.size();
  std::deque<std::future<ShopBlock>> pending;
  uint64_t next_query = 0;
  const auto submit = [&] {
    const uint64_t first = next_query;
    const uint64_t count = std::min(kQueriesPerBlock, options.queries - first);
    next_query += count;
    pending.push_back(pool.Submit([&options, &prepare, first, count] {
      ShopBlock block{first, count, GenerateShopBlock(options, first, count), {}};
      if (prepare) prepare(block);
      return block;
    }));
  };
  while (next_query < options.queries && pending.size() < window) submit();
  while (!pending.empty()) {
    ShopBlock block = pending.front().get();
    pending.pop_front();
    if (next_query < options.queries) submit();
    consume(block);
    if (progress) progress(block.first_query + block.num_queries);
  }
}

}  // namespace topspin::shop_internal
