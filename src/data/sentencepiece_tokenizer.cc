// SentencePiece: the tokenizer wrapper and training.
#include "data/sentencepiece_tokenizer.h"

#include <dlfcn.h>

#include <fstream>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "data/field_parse.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace data_internal {
namespace {

// libtopspin_spm.so (src/spm/spm_module.cc), loaded on first use: see there
// why sentencepiece is never linked into topspin itself.
struct SpmModule {
  void* (*load)(const char*, std::string*);
  void (*free)(void*);
  int (*piece_size)(void*);
  int (*eos_id)(void*);
  bool (*encode)(void*, const char*, size_t, std::vector<int>*, std::string*);
  bool (*decode)(void*, const std::vector<int>*, std::string*, std::string*);
  bool (*train)(const std::unordered_map<std::string, std::string>*, uint32_t,
                bool (*)(void*, std::string*), void*, std::string*, std::string*, std::string*);
};

std::filesystem::path SpmModulePath() {
  if (const char* env = std::getenv("TOPSPIN_SPM_MODULE")) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(exe.parent_path() / "libtopspin_spm.so")) {
    return exe.parent_path() / "libtopspin_spm.so";
  }
  return TOPSPIN_SPM_MODULE_DEFAULT;
}

const SpmModule& LoadSpmModule() {
  static std::once_flag once;
  static SpmModule module;
  static std::string failure;
  std::call_once(once, [] {
    const auto path = SpmModulePath();
#if defined(__SANITIZE_ADDRESS__)
    const int flags = RTLD_NOW | RTLD_LOCAL;  // sanitizers reject RTLD_DEEPBIND (no LibTorch there)
#else
    const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif
    void* lib = ::dlopen(path.c_str(), flags);
    if (lib == nullptr) {
      failure =
          fmt::format("{}: cannot load the SentencePiece module: {}", path.string(), ::dlerror());
      return;
    }
    const auto sym = [&](const char* name) {
      void* f = ::dlsym(lib, name);
      if (f == nullptr) failure = fmt::format("{}: missing symbol {}", path.string(), name);
      return f;
    };
    module.load = reinterpret_cast<decltype(module.load)>(sym("tspm_load"));
    module.free = reinterpret_cast<decltype(module.free)>(sym("tspm_free"));
    module.piece_size = reinterpret_cast<decltype(module.piece_size)>(sym("tspm_piece_size"));
    module.eos_id = reinterpret_cast<decltype(module.eos_id)>(sym("tspm_eos_id"));
    module.encode = reinterpret_cast<decltype(module.encode)>(sym("tspm_encode"));
    module.decode = reinterpret_cast<decltype(module.decode)>(sym("tspm_decode"));
    module.train = reinterpret_cast<decltype(module.train)>(sym("tspm_train"));
  });
  if (!failure.empty()) {
    throw IoError(failure, {},
                  "rebuild topspin (make), or point TOPSPIN_SPM_MODULE at libtopspin_spm.so");
  }
  return module;
}

constexpr const char* kSentencePieceHint =
    "pass a .model file written by `topspin tokenizer train` (or spm_train)";

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::filesystem::path& model) : model_(model) {
    if (!std::filesystem::is_regular_file(model)) {
      throw IoError("SentencePiece model not found", {.file = model.string()}, kSentencePieceHint);
    }
    std::string error;
    handle_ = spm_.load(model.c_str(), &error);
    if (handle_ == nullptr) {
      throw IoError(fmt::format("cannot load SentencePiece model: {}", error),
                    {.file = model.string()}, kSentencePieceHint);
    }
    const int eos = spm_.eos_id(handle_);
    if (eos >= 0) end_of_text_ = static_cast<uint32_t>(eos);
  }
  ~SentencePieceTokenizer() override { spm_.free(handle_); }
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  std::vector<uint32_t> Encode(std::string_view text) const override {
    std::vector<int> ids;
    std::string error;
    if (!spm_.encode(handle_, text.data(), text.size(), &ids, &error)) {
      throw DataError(fmt::format("SentencePiece cannot encode the text: {}", error),
                      {.file = model_.string()}, "is the text UTF-8?");
    }
    return {ids.begin(), ids.end()};
  }

  std::string Decode(std::span<const uint32_t> tokens) const override {
    std::vector<int> ids(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] >= vocab_size()) {
        throw DataError(fmt::format("token {} (position {}) is outside the vocabulary of {} ids",
                                    tokens[i], i, vocab_size()),
                        {.file = model_.string()},
                        "was the data tokenized with another tokenizer?");
      }
      ids[i] = static_cast<int>(tokens[i]);
    }
    std::string text, error;
    if (!spm_.decode(handle_, &ids, &text, &error)) {
      throw DataError(fmt::format("SentencePiece cannot decode: {}", error),
                      {.file = model_.string()});
    }
    return text;
  }

  uint32_t vocab_size() const override { return static_cast<uint32_t>(spm_.piece_size(handle_)); }
  std::optional<uint32_t> end_of_text() const override { return end_of_text_; }
  std::string name() const override { return "sentencepiece:" + model_.string(); }

 private:
  const SpmModule& spm_ = LoadSpmModule();
  std::filesystem::path model_;
  void* handle_ = nullptr;
  std::optional<uint32_t> end_of_text_;
};

}  // namespace

std::unique_ptr<Tokenizer> OpenSentencePieceTokenizer(const std::filesystem::path& model) {
  return std::make_unique<SentencePieceTokenizer>(model);
}

}  // namespace data_internal

namespace {

// The lines of the input files, in order, for the trainer. Stops at the
// first line that is not UTF-8 and keeps where it was.
class LineIterator {
 public:
  explicit LineIterator(const std::vector<std::filesystem::path>& inputs) : inputs_(inputs) {}

  // The next line into *line; false at the end or at the first bad line.
  bool Next(std::string* line) {
    while (!done_) {
      if (std::getline(stream_, *line)) {
        ++line_number_;
        if (CheckLine(*line)) return true;
        done_ = true;
      } else if (!OpenNext()) {
        done_ = true;
      }
    }
    return false;
  }
  static bool NextCallback(void* self, std::string* line) {
    return static_cast<LineIterator*>(self)->Next(line);
  }
  const std::optional<Error>& error() const { return error_; }

 private:
  bool OpenNext() {
    if (next_input_ >= inputs_.size()) return false;
    path_ = inputs_[next_input_++];
    stream_ = std::ifstream(path_, std::ios::binary);
    line_number_ = 0;
    if (!stream_) {
      error_ = SystemError("cannot open training text", path_.string(), errno);
      return false;
    }
    return true;
  }

  bool CheckLine(const std::string& line) {
    const size_t bad = InvalidUtf8Offset(line);
    if (bad == std::string::npos) return true;
    error_ = DataError(
        "training text is not valid UTF-8",
        {.file = path_.string(), .line = line_number_, .column = static_cast<int64_t>(bad) + 1},
        "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
    return false;
  }

  const std::vector<std::filesystem::path>& inputs_;
  size_t next_input_ = 0;
  std::filesystem::path path_;
  std::ifstream stream_;
  int64_t line_number_ = 0;
  bool done_ = false;
  std::optional<Error> error_;
};

// The trainer returns the model in memory (we write the files atomically),
// so there is no model_prefix here: SentencePiece takes one or the other.
std::unordered_map<std::string, std::string> TrainerArgs(int vocab_size,
                                                         const SentencePieceTrainOptions& options) {
  const bool byte_fallback = options.byte_fallback.value_or(vocab_size >= 1024);
  const unsigned threads =
      options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  return {
      {"vocab_size", std::to_string(vocab_size)},
      {"model_type", options.model_type},
      {"character_coverage", fmt::format("{}", options.character_coverage)},
      {"byte_fallback", byte_fallback ? "true" : "false"},
      {"input_sentence_size", std::to_string(options.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(threads)},
      // Keep text as it is so that Decode(Encode(text)) == text.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"user_defined_symbols", "\n"},
      {"minloglevel", options.verbose ? "0" : "2"},
  };
}

void CheckInputs(const std::vector<std::filesystem::path>& inputs, int vocab_size) {
  if (inputs.empty()) throw ConfigError("no training text given", {}, "pass one or more files");
  for (const auto& input : inputs) {
    if (!std::filesystem::is_regular_file(input)) {
      throw IoError("training text not found", {.file = input.string()}, "check the path");
    }
  }
  if (vocab_size < 8) {
    throw ConfigError(fmt::format("vocab size {} is too small", vocab_size),
                      {.field = "vocab_size"}, "use at least a few hundred");
  }
}

}  // namespace

void TrainSentencePiece(const std::vector<std::filesystem::path>& inputs,
                        const std::filesystem::path& model_prefix, int vocab_size,
                        const SentencePieceTrainOptions& options) {
  CheckInputs(inputs, vocab_size);
  if (model_prefix.has_parent_path())
    std::filesystem::create_directories(model_prefix.parent_path());
  const auto& spm = data_internal::LoadSpmModule();
  LineIterator lines(inputs);
  const auto args = TrainerArgs(vocab_size, options);
  std::string model, vocab, error;
  const bool ok =
      spm.train(&args, options.seed, &LineIterator::NextCallback, &lines, &model, &vocab, &error);
  if (lines.error()) throw *lines.error();
  if (!ok) {
    throw DataError(fmt::format("SentencePiece training failed: {}", error),
                    {.file = model_prefix.string() + ".model"},
                    "a smaller --vocab-size or more text usually helps");
  }
  WriteFileAtomic(model_prefix.string() + ".model", model);
  // MODEL_PREFIX.vocab as spm_train writes it: "piece<TAB>score" per id.
  WriteFileAtomic(model_prefix.string() + ".vocab", vocab);
}

}  // namespace topspin
