// The shop generator's dataset writer (kept apart from the text writers so
// that they do not pull DatasetWriter in).
#include <fmt/format.h>

#include "data/gen_shop_blocks.h"
#include "topspin/data/gen_shop.h"

namespace topspin {

Manifest WriteShopShards(const std::filesystem::path& dir, const ShopOptions& options,
                         DatasetWriterOptions writer, const ShopProgressFn& progress) {
  ValidateShopOptions(options);
  writer.out = dir;
  writer.schema = ShopSchema();
  writer.label_column = "label";
  writer.group_column = "qid";
  if (writer.created_by.empty()) {
    writer.created_by =
        fmt::format("topspin gen shop --queries {} --seed {} --min-list {} --max-list {}",
                    options.queries, options.seed, options.min_list, options.max_list);
  }
  DatasetWriter dataset(std::move(writer));
  shop_internal::RunShopBlocks(
      options, {}, [&](shop_internal::ShopBlock& block) { dataset.Append(block.table); }, progress);
  return dataset.Commit();
}

}  // namespace topspin
