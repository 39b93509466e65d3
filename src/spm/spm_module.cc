// libtopspin_spm.so: the only code that touches libsentencepiece.
//
// Debian's libsentencepiece exports its own bundled copy of protobuf; loaded
// into a process that also has LibTorch's libprotobuf, the two copies
// interpose and the process crashes at start-up. So topspin never links
// sentencepiece: src/data/sentencepiece_tokenizer.cc dlopen()s this module
// with RTLD_LOCAL | RTLD_DEEPBIND when a SentencePiece tokenizer is first
// used, and calls the plain functions below (std types only; topspin and
// this module share libstdc++).
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace {

using NextLine = bool (*)(void* context, std::string* line);

class CallbackIterator final : public sentencepiece::SentenceIterator {
 public:
  CallbackIterator(NextLine next, void* context) : next_(next), context_(context) { Next(); }
  bool done() const override { return done_; }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }
  void Next() override { done_ = !next_(context_, &line_); }

 private:
  NextLine next_;
  void* context_;
  std::string line_;
  bool done_ = false;
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* tspm_load(const char* model, std::string* error) {
  auto* p = new sentencepiece::SentencePieceProcessor();
  const auto status = p->Load(model);
  if (!status.ok()) {
    *error = status.ToString();
    delete p;
    return nullptr;
  }
  return p;
}

__attribute__((visibility("default"))) void tspm_free(void* handle) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(handle);
}

__attribute__((visibility("default"))) int tspm_piece_size(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->GetPieceSize();
}

__attribute__((visibility("default"))) int tspm_eos_id(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->eos_id();
}

__attribute__((visibility("default"))) bool tspm_encode(void* handle, const char* text, size_t size,
                                                        std::vector<int>* ids, std::string* error) {
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Encode(
      std::string_view(text, size), ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

__attribute__((visibility("default"))) bool tspm_decode(void* handle, const std::vector<int>* ids,
                                                        std::string* text, std::string* error) {
  const auto status =
      static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Decode(*ids, text);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

// Trains from the lines `next` yields. On success fills the serialized
// model and the .vocab text ("piece<TAB>score" per id).
__attribute__((visibility("default"))) bool tspm_train(
    const std::unordered_map<std::string, std::string>* args, uint32_t seed, NextLine next,
    void* context, std::string* model, std::string* vocab, std::string* error) {
  sentencepiece::SetRandomGeneratorSeed(seed);
  CallbackIterator lines(next, context);
  auto status = sentencepiece::SentencePieceTrainer::Train(*args, &lines, model);
  if (status.ok()) {
    sentencepiece::SentencePieceProcessor processor;
    status = processor.LoadFromSerializedProto(*model);
    for (int id = 0; status.ok() && id < processor.GetPieceSize(); ++id) {
      *vocab += fmt::format("{}\t{}\n", processor.IdToPiece(id), processor.GetScore(id));
    }
  }
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

}  // extern "C"
