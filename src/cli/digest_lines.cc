#include "digest_lines.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tpmsec/pcr.h"

namespace tpmsec::cli {

DigestLines::~DigestLines() { std::free(buffer_); }

Error DigestLines::bad(const std::string& why) const {
  return usage_error(fmt::format("standard input line {}: {}", line_, why));
}

Result<std::optional<Bytes>> DigestLines::next() {
  for (;;) {
    errno = 0;
    ssize_t n = getline(&buffer_, &capacity_, in_);
    if (n < 0) {
      if (std::ferror(in_)) return runtime_error(fmt::format("reading standard input: {}", std::strerror(errno)));
      return std::optional<Bytes>();
    }
    ++line_;
    std::string_view text(buffer_, static_cast<size_t>(n));
    if (text.size() > kMaxLine) return bad(fmt::format("longer than {} characters", kMaxLine));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t')) {
      text.remove_suffix(1);
    }
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    if (text.empty() || text.front() == '#') continue;
    Result<Bytes> digest = from_hex(text);
    if (!digest.ok()) return bad(digest.error().message());
    if (Status st = check_digest_length(bank_, *digest); !st.ok()) return bad(st.error().message());
    return std::optional<Bytes>(std::move(*digest));
  }
}

}  // namespace tpmsec::cli
