// topspin config show|hash|check|schema: inspect configs and the schema.
#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/core/config_schema.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/train/ranker_trainer.h"
#endif

namespace topspin::cli {
namespace {

struct ConfigArgs {
  std::string path;
  std::vector<std::string> overrides;
  bool origins = false;
  bool markdown = false;
};

Config LoadConfig(const ConfigArgs& args) {
  return args.path.empty() ? Config::Defaults(args.overrides, TopspinSchema())
                           : Config::Load(args.path, args.overrides, TopspinSchema());
}

void AddConfigArgs(CLI::App* cmd, ConfigArgs& args) {
  cmd->add_option("CONFIG", args.path, "YAML config (omit for the defaults)");
  cmd->add_option("--set", args.overrides, "override a key: --set pipeline.threads=8 (repeatable)")
      ->allow_extra_args(false);
}

}  // namespace

void RegisterConfig(CLI::App& app) {
  static ConfigArgs args;
  auto* config = app.add_subcommand("config", "Show, check and hash configs; list every key");
  config->require_subcommand(1, 1);

  auto* show =
      config->add_subcommand("show", "Print the resolved config (defaults filled in) and its hash");
  AddConfigArgs(show, args);
  show->add_flag("--origins", args.origins,
                 "comment each value with the file line or --set it came from");
  show->callback([] {
    const Config c = LoadConfig(args);
    fmt::print("{}# config hash: {}\n", c.ToYaml(args.origins), c.Hash());
  });

  auto* hash = config->add_subcommand("hash", "Print the config hash (same meaning, same hash)");
  AddConfigArgs(hash, args);
  hash->callback([] { fmt::print("{}\n", LoadConfig(args).Hash()); });

  auto* check = config->add_subcommand(
      "check",
      "Check a config as training would before it starts (keys, cross-key rules, data, "
      "features, labels, memory); exit 2 with the first problem");
  AddConfigArgs(check, args);
  check->callback([] {
    const Config c = LoadConfig(args);
#ifdef TOPSPIN_HAVE_TORCH
    for (const std::string& line : CheckTrainConfig(c)) fmt::print("{}\n", line);
#else
    fmt::print("this topspin was built without LibTorch: only the keys were checked\n");
#endif
    fmt::print("{}: ok (config hash {})\n", args.path.empty() ? "defaults" : args.path, c.Hash());
  });

  auto* schema =
      config->add_subcommand("schema", "List every key with type, default, range and meaning");
  schema->add_flag("--markdown", args.markdown, "print docs/CONFIG.md's tables");
  schema->callback([] {
    if (args.markdown) {
      fmt::print("{}", TopspinSchema().ToMarkdown());
      return;
    }
    for (const auto& f : TopspinSchema().fields()) {
      fmt::print("{:<28} {:<7} {:<10} {}\n", f.key, ValueTypeName(f.type),
                 FormatConfigValue(f.default_value), f.doc);
    }
  });
}

}  // namespace topspin::cli
