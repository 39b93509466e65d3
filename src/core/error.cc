#include "topspin/core/error.h"

#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

namespace topspin {

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kConfig: return "config";
    case ErrorKind::kData: return "data";
    case ErrorKind::kIo: return "io";
    case ErrorKind::kDist: return "dist";
    case ErrorKind::kUsage: return "usage";
    case ErrorKind::kInternal: return "internal";
  }
  return "internal";
}

bool ErrorWhere::empty() const {
  return file.empty() && field.empty() && !line && !column && !byte_offset;
}

std::string ErrorWhere::Format() const {
  std::string out = file;
  if (line) {
    out += fmt::format("{}{}", out.empty() ? "line " : ":", *line);
    if (column) out += fmt::format(":{}", *column);
  }
  if (byte_offset) out += fmt::format("{}byte {}", out.empty() ? "" : ": ", *byte_offset);
  if (!field.empty()) out += fmt::format("{}\"{}\"", out.empty() ? "" : ": ", field);
  return out;
}

Error::Error(ErrorKind kind, std::string what, ErrorWhere where, std::string hint)
    : std::runtime_error(what),
      kind_(kind),
      what_(std::move(what)),
      where_(std::move(where)),
      hint_(std::move(hint)) {}

std::string Error::Message() const {
  std::string out;
  if (!where_.empty()) out = where_.Format() + ": ";
  out += what_;
  if (!hint_.empty()) out += "; hint: " + hint_;
  return out;
}

int ExitCodeFor(const Error& error) {
  return error.IsUserError() ? kExitUser : kExitInternal;
}

Error ConfigError(std::string what, ErrorWhere where, std::string hint) {
  return Error(ErrorKind::kConfig, std::move(what), std::move(where), std::move(hint));
}
Error DataError(std::string what, ErrorWhere where, std::string hint) {
  return Error(ErrorKind::kData, std::move(what), std::move(where), std::move(hint));
}
Error IoError(std::string what, ErrorWhere where, std::string hint) {
  return Error(ErrorKind::kIo, std::move(what), std::move(where), std::move(hint));
}
Error InternalError(std::string what) {
  return Error(ErrorKind::kInternal, std::move(what), {},
               "this is a bug in topspin; please report it with the command you ran");
}

Error FilesystemError(const std::filesystem::filesystem_error& e) {
  // libstdc++: "filesystem error: cannot create directories: Permission
  // denied [/a/b]": keep the operation and the reason; the path goes in
  // where.
  std::string_view what = e.what();
  if (what.starts_with("filesystem error: ")) what.remove_prefix(18);
  if (const auto bracket = what.find(" ["); bracket != std::string_view::npos) {
    what = what.substr(0, bracket);
  }
  std::string paths = e.path1().string();
  if (!e.path2().empty()) paths += " -> " + e.path2().string();
  const int err = e.code().value();
  const char* hint = err == EACCES || err == EPERM ? "check its permissions, or choose a path you can write to"
                     : err == EROFS               ? "the filesystem is read-only: choose a writable path"
                     : err == ENOSPC || err == EDQUOT ? "the disk is full: free space and retry"
                     : err == ENOTDIR || err == EEXIST || err == EISDIR
                         ? "a file of another kind is in the way: move it or choose another path"
                         : "check the path";
  return IoError(std::string(what), ErrorWhere{.file = paths}, hint);
}

Error SystemError(const std::string& what, const std::string& file, int errnum, std::string hint) {
  return IoError(fmt::format("{}: {}", what, std::strerror(errnum)), ErrorWhere{.file = file},
                 std::move(hint));
}

}  // namespace topspin
