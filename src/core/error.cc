#include "topspin/core/error.h"

#include <cstring>

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

Error SystemError(const std::string& what, const std::string& file, int errnum, std::string hint) {
  return IoError(fmt::format("{}: {}", what, std::strerror(errnum)), ErrorWhere{.file = file},
                 std::move(hint));
}

}  // namespace topspin
