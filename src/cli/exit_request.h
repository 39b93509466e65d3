// ExitRequest: how a command ends the process with a status of its own
// choosing after it has reported its outcome itself.
//
// Errors map to exit codes in main() (user error 2, internal 1). A few
// commands need a status that is not an error of theirs: `topspin inspect
// --verify` has done its job when it finds a damaged dataset, prints what
// it found and must exit 1 (like `sha256sum -c`). Such a command throws
// ExitRequest{1}; library code never does (it throws topspin::Error and
// never exits). main() catches it before any other exception and returns
// code() without printing anything:
//
//   } catch (const cli::ExitRequest& e) {
//     return e.code();
//   }
//
// It derives from std::exception only so that a main() without that catch
// still ends with status 1 through its generic handler instead of
// std::terminate().
#pragma once

#include <exception>

namespace topspin::cli {

class ExitRequest : public std::exception {
 public:
  explicit ExitRequest(int code) : code_(code) {}
  int code() const { return code_; }
  const char* what() const noexcept override {
    return "the command printed its result above and requested a non-zero exit status";
  }

 private:
  int code_;
};

}  // namespace topspin::cli
