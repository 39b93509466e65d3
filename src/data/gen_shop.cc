// The shop generator's model: queries, products, hidden relevance, labels.
// Column meanings and null rules are documented in topspin/data/gen_shop.h.
#include "topspin/data/gen_shop.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <numbers>

#include <fmt/format.h>

#include "data/gen_shop_columns.h"
#include "topspin/core/error.h"
#include "topspin/core/rng.h"

namespace topspin {
namespace {

using namespace shop_internal;  // NOLINT: the column enum

constexpr int64_t kCategories = 300;
constexpr int64_t kBrands = 5000;
constexpr int64_t kSellers = 20000;
constexpr double kNull = std::numeric_limits<double>::quiet_NaN();

// Upper bounds of the hidden score for labels 0..3 (label 4 above the last):
// calibrated so that labels are ~50/27/13/7/3 %.
constexpr std::array<double, kShopLabels - 1> kLabelThresholds = {1.13, 2.33, 3.27, 4.41};

double Sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// Random draws on top of a PhiloxStream.
class Draw {
 public:
  Draw(uint64_t seed, uint64_t stream) : rng_(seed, stream) {}

  double Uniform() { return rng_.NextDouble(); }
  bool Chance(double p) { return rng_.NextDouble() < p; }
  uint64_t Below(uint64_t n) { return rng_.NextBelow(n); }
  double LogNormal(double mu, double sigma) { return std::exp(mu + sigma * Normal()); }

  // Standard normal: Box-Muller, both values of each pair used.
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double radius = std::sqrt(-2.0 * std::log(1.0 - rng_.NextDouble()));
    const double angle = 2.0 * std::numbers::pi * rng_.NextDouble();
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  PhiloxStream rng_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// Zipf-like ranks in [0, n): the inverse CDF of the continuous power law
// p(x) ~ x^-s on [1, n + 1] (s != 1), floored.
class Zipf {
 public:
  Zipf(int64_t n, double s) : n_(n), a_(1.0 - s), span_(std::pow(n + 1.0, 1.0 - s) - 1.0) {}
  int64_t operator()(Draw& d) const {
    const double x = std::pow(span_ * d.Uniform() + 1.0, 1.0 / a_);
    return std::clamp<int64_t>(static_cast<int64_t>(x) - 1, 0, n_ - 1);
  }

 private:
  int64_t n_;
  double a_, span_;
};

// Fixed attributes of categories and sellers.
struct Category {
  double log_price = 0;  // log of the median price
  double return_bias = 0;
};
struct Seller {
  double quality = 0;
  double age_days = 0;
  double rating = 0;
  double fast_propensity = 0;
};

// Every category, brand and seller of one seed, each drawn from its own
// stream, and the popularity (Zipf) samplers.
struct Catalog {
  explicit Catalog(uint64_t seed);

  uint64_t seed;
  std::vector<Category> categories;
  std::vector<double> brand_quality;
  std::vector<Seller> sellers;
  Zipf category_rank{kCategories, 1.05};
  Zipf brand_rank{kBrands, 1.1};
  Zipf seller_rank{kSellers, 1.0 + 1e-3};
};

enum class Entity : uint64_t { kCategory = 1, kBrand = 2, kSeller = 3 };

Draw EntityDraw(uint64_t seed, Entity kind, int64_t id) {
  return Draw(seed, (static_cast<uint64_t>(kind) << 56) | static_cast<uint64_t>(id));
}

Catalog::Catalog(uint64_t seed_in) : seed(seed_in) {
  for (int64_t id = 0; id < kCategories; ++id) {
    Draw d = EntityDraw(seed, Entity::kCategory, id);
    categories.push_back({2.3 + 2.2 * d.Uniform(), 0.03 * d.Normal()});
  }
  for (int64_t id = 0; id < kBrands; ++id) {
    brand_quality.push_back(EntityDraw(seed, Entity::kBrand, id).Normal());
  }
  for (int64_t id = 0; id < kSellers; ++id) {
    Draw d = EntityDraw(seed, Entity::kSeller, id);
    Seller s;
    s.quality = d.Normal();
    s.age_days = std::clamp(std::floor(d.LogNormal(6.3, 1.1)), 1.0, 7300.0);
    s.rating = std::clamp(4.45 + 0.25 * s.quality + 0.1 * d.Normal(), 1.0, 5.0);
    s.fast_propensity = 0.6 * s.quality + 0.8 * d.Normal();
    sellers.push_back(s);
  }
}

// The catalog of `seed`, built once and shared (writers ask per block).
std::shared_ptr<const Catalog> CatalogFor(uint64_t seed) {
  static std::mutex mu;
  static std::shared_ptr<const Catalog> last;  // guarded by mu
  std::lock_guard<std::mutex> lock(mu);
  if (!last || last->seed != seed) last = std::make_shared<const Catalog>(seed);
  return last;
}

double Round(double value, double unit) {
  return std::round(value / unit) * unit;
}

// What one query shares across its list.
struct Query {
  uint64_t qid = 0;
  int64_t category = 0;
  double price_sensitivity = 0;
};

// Hidden latents of a product (never written out).
struct Latent {
  double text = 0;        // how well the listing matches the query
  double quality = 0;     // product quality
  double popularity = 0;  // demand
  double price_z = 0;     // price relative to its category, in sigmas
};

void DrawText(Draw& d, const Latent& h, ShopRow& row) {
  const auto bm25 = [](double score) { return Round(std::max(0.0, score), 1e-4); };
  row[kTitleRelevance] = bm25(6.0 + 3.0 * (0.75 * h.text + 0.65 * d.Normal()));
  const bool has_description = !d.Chance(0.03);
  row[kDescriptionRelevance] =
      has_description ? bm25(5.0 + 2.5 * (0.5 * h.text + 0.85 * d.Normal())) : kNull;
  row[kKeywordsRelevance] =
      d.Chance(0.30) ? kNull : bm25(4.0 + 3.0 * (0.6 * h.text + 0.8 * d.Normal()));
  row[kPhotosCount] = std::clamp(std::round(d.LogNormal(1.6 + 0.3 * h.quality, 0.45)), 1.0, 24.0);
  row[kDescriptionLength] =
      has_description ? std::min(20000.0, std::round(d.LogNormal(6.0 + 0.25 * h.quality, 0.7)))
                      : 0.0;
}

void DrawSales(Draw& d, const Latent& h, ShopRow& row) {
  const double sales_30d =
      std::max(0.0, std::floor(d.LogNormal(1.2 + 1.4 * h.popularity, 0.6) - 1));
  const double stability = Sigmoid(1.0 + 0.5 * h.quality + d.Normal());
  const double weekly = sales_30d * 7.0 / 30.0 * std::exp((1.0 - stability) * d.Normal());
  row[kSales30d] = sales_30d;
  row[kSales7d] = std::min(sales_30d, std::round(weekly));
  row[kSalesStability] =
      sales_30d > 0 ? std::clamp(Round(stability + 0.08 * d.Normal(), 0.001), 0.0, 1.0) : kNull;
  const bool out_of_stock = d.Chance(0.12 + 0.1 * Sigmoid(h.popularity));
  const double u = d.Uniform();
  row[kOutOfStockDays] = out_of_stock ? 1.0 + std::floor(29.0 * u * u) : 0.0;
}

void DrawRatings(Draw& d, const Latent& h, ShopRow& row) {
  const double count = std::max(
      0.0,
      std::floor(d.LogNormal(
                     0.6 + 1.3 * h.popularity + 0.25 * std::log1p(row[kListingAgeDays] / 30), 0.8) -
                 1));
  row[kRatingCount] = count;
  const double u = d.Uniform();
  row[kReviewCount] = std::floor(count * 0.6 * u * u);
  const double noise = d.Normal() * 1.1 / std::sqrt(count + 1.0);
  row[kRatingAvg] =
      count > 0 ? std::clamp(Round(4.3 + 0.35 * h.quality + noise, 0.01), 1.0, 5.0) : kNull;
}

void DrawEngagement(Draw& d, const Latent& h, ShopRow& row) {
  row[kExternalTraffic] =
      d.Chance(0.08) ? kNull : Round(d.LogNormal(-0.5 + 1.0 * h.popularity, 1.2), 0.01);
  const bool measured = row[kListingAgeDays] >= 14 && !d.Chance(0.05);
  const double ctr = Sigmoid(-3.2 + 0.45 * h.text + 0.25 * h.quality + 0.4 * d.Normal());
  const double cvr =
      Sigmoid(-3.3 + 0.4 * h.quality + 0.3 * h.popularity - 0.3 * h.price_z + 0.4 * d.Normal());
  row[kCtr] = measured ? Round(ctr, 1e-5) : kNull;
  row[kConversionRate] = measured ? Round(cvr, 1e-5) : kNull;
  row[kPreviousPosition] =
      d.Chance(0.25)
          ? kNull
          : std::clamp(std::floor(d.LogNormal(2.5 - 0.6 * h.popularity, 0.7)), 1.0, 200.0);
}

void DrawOffer(Draw& d, const Latent& h, const Category& category, const Seller& seller,
               ShopRow& row) {
  row[kPrice] = Round(std::exp(category.log_price + 0.55 * h.price_z), 0.01);
  static constexpr double kDiscounts[] = {0.05, 0.1, 0.1, 0.15, 0.2, 0.2, 0.25, 0.3, 0.4, 0.5};
  row[kDiscount] = d.Chance(0.7) ? 0.0 : kDiscounts[d.Below(std::size(kDiscounts))];
  const bool fast = d.Chance(Sigmoid(-0.4 + seller.fast_propensity));
  row[kFastShipping] = fast ? 1.0 : 0.0;
  row[kDeliveryDays] = fast ? 1.0 + static_cast<double>(d.Below(2))
                            : std::min(30.0, 2.0 + std::floor(d.LogNormal(1.0, 0.5)));
  row[kSellerRating] = seller.age_days < 90 ? kNull : Round(seller.rating, 0.01);
  row[kSellerAgeDays] = seller.age_days;
  row[kReturnRate] =
      row[kSales30d] < 3
          ? kNull
          : std::clamp(
                Round(0.06 + category.return_bias - 0.02 * h.quality + 0.03 * d.Normal(), 0.001),
                0.0, 1.0);
}

// The hidden relevance: a function of the written features plus noise.
double HiddenScore(Draw& d, const Query& q, const Category& category, const ShopRow& row) {
  const auto or0 = [](double v) { return std::isnan(v) ? 0.0 : v; };
  const double title = (row[kTitleRelevance] - 6.0) / 3.0;
  const double description = or0((row[kDescriptionRelevance] - 5.0) / 2.5);
  const double keywords = or0((row[kKeywordsRelevance] - 4.0) / 3.0);
  const double sales = std::log1p(row[kSales30d]) - 1.2;
  const double confidence = std::min(1.0, std::log1p(row[kRatingCount]) / 3.0);
  const double rating = std::isnan(row[kRatingAvg]) ? -0.1 : (row[kRatingAvg] - 4.3) / 0.4;
  const double quality = 0.5 * rating * confidence + 0.3 * sales;
  const double price = (std::log(row[kPrice]) - category.log_price) / 0.55;
  double score = 0.6 * title + 0.3 * description + 0.25 * keywords;
  score += row[kCategory] == row[kQueryCategory] ? 0.7 : 0.0;
  score += quality + 0.35 * std::max(0.0, title) * std::max(0.0, quality);
  score += q.price_sensitivity * (0.8 * row[kDiscount] - 0.25 * price);
  score += 0.15 * row[kFastShipping] - (row[kOutOfStockDays] > 7 ? 0.4 : 0.0);
  return score + 0.7 * d.Normal();
}

float LabelOf(double score) {
  int label = 0;
  while (label < kShopLabels - 1 && score > kLabelThresholds[label]) ++label;
  return static_cast<float>(label);
}

void DrawProduct(Draw& d, const Catalog& catalog, const Query& q, ShopRow& row) {
  const int64_t category = d.Chance(0.7) ? q.category : catalog.category_rank(d);
  const int64_t brand = d.Chance(0.12) ? -1 : catalog.brand_rank(d);
  const int64_t seller_id = catalog.seller_rank(d);
  const Seller& seller = catalog.sellers[seller_id];
  const double brand_quality = brand < 0 ? -0.4 : catalog.brand_quality[brand];
  Latent h;
  h.text = d.Normal() + (category == q.category ? 1.0 : -0.3);
  h.quality = 0.5 * brand_quality + 0.3 * seller.quality + 0.7 * d.Normal();
  h.popularity = 0.5 * h.quality + 0.3 * h.text + 0.8 * d.Normal();
  h.price_z = d.Normal() + 0.2 * h.quality;

  row[kQid] = static_cast<double>(q.qid);
  row[kBrand] = brand < 0 ? kNull : static_cast<double>(brand);
  row[kCategory] = static_cast<double>(category);
  row[kSeller] = static_cast<double>(seller_id);
  row[kQueryCategory] = static_cast<double>(q.category);
  row[kListingAgeDays] = std::min(3650.0, std::floor(d.LogNormal(5.0, 1.3)));
  const Category& category_info = catalog.categories[category];
  DrawText(d, h, row);
  DrawSales(d, h, row);
  DrawRatings(d, h, row);
  DrawEngagement(d, h, row);
  DrawOffer(d, h, category_info, seller, row);
  row[kLabel] = LabelOf(HiddenScore(d, q, category_info, row));
}

}  // namespace

void ValidateShopOptions(const ShopOptions& options) {
  if (options.min_list < 1 || options.min_list > kShopMaxList) {
    throw ConfigError(fmt::format("min_list {} is outside 1..{}", options.min_list, kShopMaxList),
                      {.field = "min_list"});
  }
  if (options.max_list < options.min_list || options.max_list > kShopMaxList) {
    throw ConfigError(fmt::format("max_list {} is outside min_list..{} ({}..{})", options.max_list,
                                  kShopMaxList, options.min_list, kShopMaxList),
                      {.field = "max_list"});
  }
  if (options.queries >= (uint64_t{1} << 48)) {
    throw ConfigError(fmt::format("{} queries is too many (at most 2^48)", options.queries),
                      {.field = "queries"});
  }
}

Table GenerateShopBlock(const ShopOptions& options, uint64_t first_query, uint64_t num_queries) {
  ValidateShopOptions(options);
  if (first_query + num_queries > (uint64_t{1} << 48)) {
    throw ConfigError(fmt::format("queries {}..{} are past the last query id 2^48 - 1", first_query,
                                  first_query + num_queries - 1),
                      {.field = "queries"});
  }
  Table table = Table::Empty(ShopSchema());
  // The mean list length plus slack, so that a block rarely reallocates.
  const auto expected_rows =
      static_cast<size_t>(num_queries * (options.min_list + options.max_list) * 0.6) + 64;
  for (auto& column : table.columns) column.Reserve(expected_rows);
  const std::shared_ptr<const Catalog> catalog = CatalogFor(options.seed);
  ShopRow row;
  for (uint64_t q = first_query; q < first_query + num_queries; ++q) {
    Draw d(options.seed, q);
    Query query;
    query.qid = q;
    query.category = catalog->category_rank(d);
    query.price_sensitivity = d.Uniform();
    const auto span = static_cast<uint64_t>(options.max_list - options.min_list + 1);
    const int length = options.min_list + static_cast<int>(d.Below(span));
    for (int i = 0; i < length; ++i) {
      DrawProduct(d, *catalog, query, row);
      AppendShopRow(row, table);
    }
  }
  return table;
}

}  // namespace topspin
