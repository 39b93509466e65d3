// topspin tokenizer train INPUT... --model-prefix P --vocab-size N: trains a
// SentencePiece model (P.model, P.vocab) for `topspin convert --format text
// --tokenizer sentencepiece:P.model`.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/data/tokenizer.h"

namespace topspin::cli {
namespace {

struct TrainArgs {
  std::vector<std::string> inputs;
  std::string model_prefix;
  int vocab_size = 8000;
  std::string byte_fallback = "auto";
  SentencePieceTrainOptions options;
};

void RunTrain(TrainArgs& args) {
  if (args.byte_fallback != "auto") args.options.byte_fallback = args.byte_fallback == "on";
  const std::vector<fs::path> inputs(args.inputs.begin(), args.inputs.end());
  uint64_t bytes = 0;
  for (const auto& input : inputs) bytes += fs::file_size(input);
  fmt::print("training a {} SentencePiece model ({} pieces) on {} of text...\n",
             args.options.model_type, args.vocab_size, FormatBytes(bytes));
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  TrainSentencePiece(inputs, args.model_prefix, args.vocab_size, args.options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string model = args.model_prefix + ".model";
  const auto tokenizer = OpenTokenizer("sentencepiece:" + model);
  fmt::print("wrote {} and {}.vocab: {} pieces in {:.1f} s\n", model, args.model_prefix,
             tokenizer->vocab_size(), seconds);
  fmt::print("use it: topspin convert FILE --format text --tokenizer sentencepiece:{} --out DIR\n",
             model);
}

}  // namespace

void RegisterTokenizer(CLI::App& app) {
  static TrainArgs args;
  auto* tokenizer = app.add_subcommand("tokenizer", "Train SentencePiece tokenizers");
  tokenizer->require_subcommand(1, 1);
  auto* train = tokenizer->add_subcommand(
      "train",
      "Train a SentencePiece model on UTF-8 text files (one sentence per line). The model keeps "
      "text as is (no normalization, whitespace and line breaks kept), so token ids decode back "
      "to the exact text; ids 0 <unk>, 1 <s>, 2 </s> (end of text), 3 newline");
  train->add_option("INPUT", args.inputs, "training text files")
      ->required()
      ->check(CLI::ExistingFile);
  train
      ->add_option("--model-prefix", args.model_prefix,
                   "writes PREFIX.model and PREFIX.vocab (directories are created)")
      ->required();
  train->add_option("--vocab-size", args.vocab_size, "number of pieces, specials included")
      ->check(CLI::Range(8, 1 << 20))
      ->capture_default_str();
  train->add_option("--model-type", args.options.model_type, "unigram | bpe | char | word")
      ->check(CLI::IsMember({"unigram", "bpe", "char", "word"}))
      ->capture_default_str();
  train
      ->add_option("--character-coverage", args.options.character_coverage,
                   "fraction of characters the pieces must cover")
      ->check(CLI::Range(0.5, 1.0))
      ->capture_default_str();
  train
      ->add_option("--byte-fallback", args.byte_fallback,
                   "spell uncovered characters as UTF-8 byte pieces (needs vocab > ~260): "
                   "auto (on from 1024 pieces) | on | off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  train
      ->add_option("--max-sentences", args.options.max_sentences,
                   "lines sampled for training (0: all)")
      ->capture_default_str();
  train->add_option("--threads", args.options.threads, "training threads (0: one per core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  train->add_option("--seed", args.options.seed, "seed for sampling the training lines")
      ->capture_default_str();
  train->add_flag("--verbose", args.options.verbose, "print SentencePiece's training log");
  train->callback([] { RunTrain(args); });
}

}  // namespace topspin::cli
