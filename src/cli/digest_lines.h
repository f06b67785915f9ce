// The digests of a batch extend (`pcr extend INDEX -`), read from a stream.
#ifndef TPMSEC_SRC_CLI_DIGEST_LINES_H_
#define TPMSEC_SRC_CLI_DIGEST_LINES_H_

#include <cstdio>
#include <optional>
#include <string>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec::cli {

// Digests for a batch extend (`pcr extend INDEX -`): one hex digest per line,
// surrounding blanks and a CR ignored, blank lines and `#` comments skipped.
class DigestLines {
 public:
  DigestLines(std::FILE* in, uint16_t bank) : in_(in), bank_(bank) {}
  DigestLines(const DigestLines&) = delete;
  DigestLines& operator=(const DigestLines&) = delete;
  ~DigestLines();

  // The next digest; std::nullopt at the end of the input; a usage error
  // naming the line for anything that is not a digest of the bank's size.
  Result<std::optional<Bytes>> next();
  size_t line() const { return line_; }

 private:
  static constexpr size_t kMaxLine = 1024;
  Error bad(const std::string& why) const;

  std::FILE* in_;
  uint16_t bank_;
  char* buffer_ = nullptr;
  size_t capacity_ = 0;
  size_t line_ = 0;
};

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_DIGEST_LINES_H_
