// topspin tokenizer train INPUT... --model-prefix P --vocab-size N: trains a
// SentencePiece model (P.model, P.vocab) for `topspin convert --format text
// --tokenizer sentencepiece:P.model`.
// topspin tokenizer encode --tokenizer SPEC [--json] [FILE|-]: the ids of
// one document, on one line. topspin tokenizer decode --tokenizer SPEC
// [FILE|-]: ids (whitespace separated or a JSON array) back to the text.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

struct CodecArgs {
  std::string tokenizer = "bytes";
  std::string input = "-";
  bool json = false;
};

// FILE, or stdin for "-": the whole of it, bytes as they are.
std::string ReadInput(const std::string& input) {
  if (input != "-") return ReadFile(input);
  std::cin >> std::noskipws;
  return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
}

std::string InputName(const std::string& input) {
  return input == "-" ? "<stdin>" : input;
}

void WriteStdout(std::string_view bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() ||
      std::fflush(stdout) != 0) {
    throw SystemError("cannot write the output", "<stdout>", errno);
  }
}

// The ids of "1 2 3" or "[1, 2, 3]".
std::vector<uint32_t> ParseIds(std::string_view text, const std::string& name) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '[') {
    const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_array()) {
      throw DataError("not a JSON array of token ids", {.file = name},
                      "pass ids as [1, 2, 3] or whitespace separated");
    }
    std::vector<uint32_t> ids;
    for (size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_number_unsigned() || j[i].get<uint64_t>() > UINT32_MAX) {
        throw DataError(fmt::format("element {} ({}) is not a token id", i, j[i].dump()),
                        {.file = name}, "token ids are integers 0..vocab_size-1");
      }
      ids.push_back(j[i].get<uint32_t>());
    }
    return ids;
  }
  std::vector<uint32_t> ids;
  for (size_t pos = first; pos != std::string_view::npos;
       pos = text.find_first_not_of(" \t\r\n", pos)) {
    const size_t end = std::min(text.find_first_of(" \t\r\n", pos), text.size());
    uint32_t id = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + pos, text.data() + end, id);
    if (ec != std::errc() || ptr != text.data() + end) {
      throw DataError(
          fmt::format("\"{}\" is not a token id",
                      text.substr(pos, std::min<size_t>(end - pos, 40))),
          {.file = name, .byte_offset = static_cast<int64_t>(pos)},
          "token ids are integers 0..vocab_size-1, whitespace separated or a JSON array");
    }
    ids.push_back(id);
    pos = end;
  }
  return ids;
}

// An encoding error about the text (invalid UTF-8 for gpt2:) names the input.
[[noreturn]] void RethrowNamingInput(const Error& e, const std::string& name) {
  if (!e.where().file.empty()) throw e;
  ErrorWhere where = e.where();
  where.file = name;
  throw Error(e.kind(), e.what_text(), where, e.hint());
}

void RunEncode(const CodecArgs& args) {
  const auto tokenizer = OpenTokenizer(args.tokenizer);
  const std::string text = ReadInput(args.input);
  std::vector<uint32_t> ids;
  try {
    ids = tokenizer->Encode(text);
  } catch (const Error& e) {
    RethrowNamingInput(e, InputName(args.input));
  }
  fmt::memory_buffer out;
  if (args.json) {
    fmt::format_to(std::back_inserter(out), "[{}]\n", fmt::join(ids, ","));
  } else {
    fmt::format_to(std::back_inserter(out), "{}\n", fmt::join(ids, " "));
  }
  WriteStdout({out.data(), out.size()});
}

void RunDecode(const CodecArgs& args) {
  const auto tokenizer = OpenTokenizer(args.tokenizer);
  const std::vector<uint32_t> ids = ParseIds(ReadInput(args.input), InputName(args.input));
  WriteStdout(tokenizer->Decode(ids));
}

void AddCodecOptions(CLI::App* cmd, CodecArgs& args, const char* input_help) {
  cmd->add_option("--tokenizer", args.tokenizer,
                  "bytes | sentencepiece:MODEL | gpt2:DIR (DIR/vocab.json, DIR/merges.txt)")
      ->capture_default_str();
  cmd->add_option("INPUT", args.input, input_help)->capture_default_str();
}

void RegisterCodec(CLI::App* tokenizer) {
  static CodecArgs encode_args, decode_args;
  auto* encode = tokenizer->add_subcommand(
      "encode",
      "Print the token ids of a text file (one document, bytes as they are; no end-of-text "
      "token) on one line, space separated");
  AddCodecOptions(encode, encode_args, "the text: a file, or - for stdin");
  encode->add_flag("--json", encode_args.json, "print the ids as a JSON array");
  encode->callback([] { RunEncode(encode_args); });
  auto* decode = tokenizer->add_subcommand(
      "decode",
      "Write the text of token ids (whitespace separated, or a JSON array) to stdout, "
      "dropping end-of-text");
  AddCodecOptions(decode, decode_args, "the ids: a file, or - for stdin");
  decode->callback([] { RunDecode(decode_args); });
}

}  // namespace

void RegisterTokenizer(CLI::App& app) {
  static TrainArgs args;
  auto* tokenizer =
      app.add_subcommand("tokenizer", "Train SentencePiece tokenizers; encode and decode text");
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
  RegisterCodec(tokenizer);
}

}  // namespace topspin::cli
