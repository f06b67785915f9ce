// The server layer's log lines (ServerOptions::log, ResourceManager's log)
// begin with sd-daemon(3)'s priority prefix: "<3>" an error, "<4>" a
// warning, "<6>" information, "<7>" debug (SD_ERR, SD_WARNING, SD_INFO,
// SD_DEBUG). A sink writing to the journal keeps it (journald reads it off
// the start of a line: `journalctl -p err` finds errors); any other sink
// strips it (split_priority). A line without one is a warning: what the
// server does on its own is about a client it refused or dropped.
#ifndef TPMSEC_SERVER_RESOURCE_MANAGER_LOG_PRIORITY_H_
#define TPMSEC_SERVER_RESOURCE_MANAGER_LOG_PRIORITY_H_

#include <string_view>

namespace tpmsec::server {

inline constexpr std::string_view kLogErr = "<3>";
inline constexpr std::string_view kLogWarning = "<4>";
inline constexpr std::string_view kLogInfo = "<6>";
inline constexpr std::string_view kLogDebug = "<7>";

struct LogLine {
  int priority = 4;  // syslog's: 3 err, 4 warning, 6 info, 7 debug
  std::string_view text;
};

// The priority of `line` (4 when it has no "<N>" prefix, N one digit) and
// its text without the prefix.
inline LogLine split_priority(std::string_view line) {
  if (line.size() >= 3 && line[0] == '<' && line[1] >= '0' && line[1] <= '7' && line[2] == '>') {
    return LogLine{line[1] - '0', line.substr(3)};
  }
  return LogLine{4, line};
}

}  // namespace tpmsec::server

#endif  // TPMSEC_SERVER_RESOURCE_MANAGER_LOG_PRIORITY_H_
