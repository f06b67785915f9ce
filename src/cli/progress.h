// Progress on long runs (a line on stderr when it is a terminal, or --progress) and Ctrl-C
// that stops a run cleanly (handles flushed, PCR reset, partial results).
#ifndef TPMSEC_SRC_CLI_PROGRESS_H_
#define TPMSEC_SRC_CLI_PROGRESS_H_

#include <CLI/CLI.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <string>

#include "tpmsec/clock.h"

namespace tpmsec::cli {

// --progress / --no-progress: progress is drawn on stderr when it is a
// terminal, unless told otherwise.
struct ProgressFlags {
  bool on = false;
  bool off = false;
  void add_to(CLI::App* sub);
  bool enabled() const;
};

// One line on stderr, redrawn with \r at most four times a second (the first
// and the last state always): done of total, and the time left estimated
// from the time so far on `clock` (the TPM's: virtual when emulated; null:
// the host's). total 0 is an unknown total (standard input): a count and the
// time per item. finish() (or the destructor) clears the line on a terminal
// and ends it with a newline elsewhere, so nothing is printed after it on it.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled, const Clock* clock = nullptr);
  ~ProgressBar();
  void update(size_t done, size_t total, const std::string& what);
  void finish();

 private:
  void draw();
  bool enabled_;
  bool terminal_;
  bool drawn_ = false;
  const Clock* clock_;
  SteadyClock steady_;
  int64_t start_ns_;
  std::chrono::steady_clock::time_point last_draw_{};
  size_t done_ = 0, total_ = 0;
  std::string what_;
  size_t width_ = 0;
};

// While alive, SIGINT, SIGTERM and SIGHUP set flag() instead of killing the process.
class StopOnInterrupt {
 public:
  StopOnInterrupt();
  ~StopOnInterrupt();
  const std::atomic<bool>* flag() const;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<void (*)(int), 3> previous_{};
};

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_PROGRESS_H_
