#include "topspin/data/gen_text.h"

#include <algorithm>

#include "data/field_parse.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

// Regular files (not links) directly in `dir`, sorted by name.
std::vector<fs::path> FilesIn(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_symlink() || !it->is_regular_file()) continue;
    files.push_back(it->path());
  }
  if (ec) throw SystemError("cannot list the text corpus directory", dir.string(), ec.value());
  std::sort(files.begin(), files.end());
  return files;
}

// dir/*/copyright for package directories that are not links, by package.
std::vector<fs::path> CopyrightFiles(const fs::path& doc_dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(doc_dir)) return files;
  std::error_code ec;
  for (fs::directory_iterator it(doc_dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_symlink() || !it->is_directory()) continue;
    const fs::path copyright = it->path() / "copyright";
    if (fs::is_regular_file(fs::symlink_status(copyright))) files.push_back(copyright);
  }
  if (ec)
    throw SystemError("cannot list the documentation directory", doc_dir.string(), ec.value());
  std::sort(files.begin(), files.end());
  return files;
}

// Appends `text` and a blank line, cut to the last line break that fits
// under `max_bytes` (0: no cap). False when the cap was reached.
bool AppendCapped(std::string& corpus, std::string_view text, uint64_t max_bytes) {
  std::string piece(text);
  if (!piece.empty() && piece.back() != '\n') piece += '\n';
  piece += '\n';
  if (max_bytes == 0 || corpus.size() + piece.size() <= max_bytes) {
    corpus += piece;
    return true;
  }
  const size_t room = max_bytes - corpus.size();
  const size_t cut = piece.rfind('\n', room == 0 ? 0 : room - 1);
  if (room > 0 && cut != std::string::npos) corpus.append(piece, 0, cut + 1);
  return false;
}

}  // namespace

std::vector<fs::path> ListTextCorpusFiles(const TextCorpusOptions& options) {
  std::vector<fs::path> files;
  for (const auto& root : options.roots) {
    if (!fs::is_directory(root)) {
      throw IoError("text corpus source is not a directory", {.file = root.string()},
                    "Debian and Ubuntu ship /usr/share/common-licenses (package base-files); "
                    "elsewhere pass directories of .txt files");
    }
    const auto in_root = FilesIn(root);
    files.insert(files.end(), in_root.begin(), in_root.end());
  }
  if (options.include_copyrights) {
    const auto copyrights = CopyrightFiles(options.doc_dir);
    files.insert(files.end(), copyrights.begin(), copyrights.end());
  }
  return files;
}

std::string BuildTextCorpus(const TextCorpusOptions& options, TextCorpusSummary* summary) {
  TextCorpusSummary result;
  std::string corpus;
  for (const auto& file : ListTextCorpusFiles(options)) {
    const std::string text = ReadFile(file);
    if (InvalidUtf8Offset(text) != std::string_view::npos) {
      ++result.skipped_files;
      continue;
    }
    const size_t before = corpus.size();
    const bool fits = AppendCapped(corpus, text, options.max_bytes);
    if (corpus.size() > before) ++result.files;
    if (!fits) {
      result.truncated = true;
      break;
    }
  }
  result.bytes = corpus.size();
  if (summary != nullptr) *summary = result;
  return corpus;
}

TextCorpusSummary WriteTextCorpus(const fs::path& out, const TextCorpusOptions& options) {
  TextCorpusSummary summary;
  const std::string corpus = BuildTextCorpus(options, &summary);
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  WriteFileAtomic(out, corpus);
  return summary;
}

}  // namespace topspin
