// A small text corpus for the GPT demo, made from text every Debian (and
// Ubuntu) machine has, so `topspin gen text` needs no download.
//
// Sources, in this order:
//   1. the regular files directly in each of `roots` (default
//      /usr/share/common-licenses: Apache-2.0, Artistic, BSD, CC0-1.0,
//      GFDL-1.2/1.3, GPL-1/2/3, LGPL-2/2.1/3, MPL-1.1/2.0; about 240 KB on
//      Debian 12), each root's files sorted by name (bytewise);
//   2. with include_copyrights, /usr/share/doc/*/copyright sorted by package
//      name (tens of MB; which packages are installed varies by machine, so
//      this part differs between machines).
// Symbolic links are skipped (GPL -> GPL-3 would repeat a text), and so are
// files that are not valid UTF-8 (counted in the summary). Each file's
// text is followed by one empty line. With max_bytes, the corpus ends at
// the last line break that fits. The output is a pure function of the
// files' contents: same machine, same bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace topspin {

struct TextCorpusOptions {
  std::vector<std::filesystem::path> roots = {"/usr/share/common-licenses"};
  bool include_copyrights = false;
  std::filesystem::path doc_dir = "/usr/share/doc";  // where copyright files are looked up
  uint64_t max_bytes = 0;                            // 0: no cap
};

struct TextCorpusSummary {
  uint64_t files = 0;          // files whose text (or a prefix of it) is in the corpus
  uint64_t bytes = 0;          // corpus size
  uint64_t skipped_files = 0;  // not UTF-8
  bool truncated = false;      // stopped at max_bytes
};

// The files the corpus is made from, in corpus order, before the UTF-8
// check and the cap. Throws Error{kIo} naming a root that is not a
// directory, with a hint to pass other sources.
std::vector<std::filesystem::path> ListTextCorpusFiles(const TextCorpusOptions& options);

// The corpus text. `summary` (optional) receives what went in.
std::string BuildTextCorpus(const TextCorpusOptions& options, TextCorpusSummary* summary = nullptr);

// Builds the corpus and writes it to `out` atomically (parent directories
// are created).
TextCorpusSummary WriteTextCorpus(const std::filesystem::path& out,
                                  const TextCorpusOptions& options);

}  // namespace topspin
