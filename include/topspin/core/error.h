// topspin::Error: the one exception family of the project.
//
// Every error says what went wrong, where (file, field, line, column, byte
// offset; each optional) and what to do about it (hint). Library code throws;
// it never calls exit() or abort(). The CLI catches at the top, prints
// Error::Message() on one line and exits with ExitCodeFor(kind).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

namespace topspin {

enum class ErrorKind {
  kConfig,    // a config file or --set override is wrong (user error)
  kData,      // input data is malformed or damaged (user error)
  kIo,        // a file cannot be read, written or found (user error)
  kDist,      // launching or joining a distributed job failed (user error)
  kUsage,     // the command line is wrong (user error)
  kInternal,  // a bug in topspin
};

const char* ErrorKindName(ErrorKind kind);

// Where an error happened. Fields that do not apply stay empty.
struct ErrorWhere {
  std::string file;                    // path of the file involved
  std::string field;                   // config key, column or JSON field
  std::optional<int64_t> line;         // 1-based
  std::optional<int64_t> column;       // 1-based
  std::optional<int64_t> byte_offset;  // 0-based offset into `file`

  bool empty() const;
  // "file:line:column", "file: byte 123", "field \"a.b\"" joined by ": ".
  std::string Format() const;
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string what, ErrorWhere where = {}, std::string hint = {});

  ErrorKind kind() const { return kind_; }
  const std::string& what_text() const { return what_; }
  const ErrorWhere& where() const { return where_; }
  const std::string& hint() const { return hint_; }

  // "<where>: <what>; hint: <hint>", one line, as the CLI prints it.
  std::string Message() const;

  // True for the kinds a user can fix (everything but kInternal).
  bool IsUserError() const { return kind_ != ErrorKind::kInternal; }

 private:
  ErrorKind kind_;
  std::string what_;
  ErrorWhere where_;
  std::string hint_;
};

// What to do with a row or row group that cannot be read: stop with its
// error, or skip it and count it (`--on-error`, pipeline.on_error).
enum class OnError { kFail, kSkip };

// Process exit codes of the CLI: 0 ok, 1 internal error, 2 user error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitUser = 2;
int ExitCodeFor(const Error& error);

// Shorthands for the common kinds.
[[nodiscard]] Error ConfigError(std::string what, ErrorWhere where = {}, std::string hint = {});
[[nodiscard]] Error DataError(std::string what, ErrorWhere where = {}, std::string hint = {});
[[nodiscard]] Error IoError(std::string what, ErrorWhere where = {}, std::string hint = {});
[[nodiscard]] Error InternalError(std::string what);

// IoError for a std::filesystem failure (permission denied, read-only,
// not a directory...), naming its path(s) and the failed operation.
[[nodiscard]] Error FilesystemError(const std::filesystem::filesystem_error& e);

// IoError for a failed system call: appends strerror(errnum) to `what`.
[[nodiscard]] Error SystemError(const std::string& what, const std::string& file, int errnum,
                                std::string hint = {});

}  // namespace topspin
