// Progress on long runs (a line on stderr when it is a terminal, or --progress) and Ctrl-C
// that stops a run cleanly (handles flushed, PCR reset, partial results).
#ifndef TPMSEC_SRC_CLI_PROGRESS_H_
#define TPMSEC_SRC_CLI_PROGRESS_H_

#include <CLI/CLI.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "tpmsec/transport/clock.h"

namespace tpmsec::cli {

// --progress / --no-progress: progress is drawn on stderr when it is a
// terminal, unless told otherwise.
struct ProgressFlags {
  bool on = false;
  bool off = false;
  void add_to(CLI::App* sub);
  bool enabled() const;
};

// Progress on stderr: done of total, and the time left estimated from the
// recent rate (the last few seconds of updates, not the whole run's
// average) on `clock` (the TPM's: virtual when emulated; null: the host's).
// total 0 is an unknown total (standard input): a count and the time per item.
// On a terminal one line is redrawn with \r every kTerminalPeriod, by
// elapsed time: between updates too, so a slow stretch never freezes it, and
// the time left counts down. Elsewhere (a log) it writes whole lines, at
// most one per kLogPeriod. The first and the last state are always drawn.
// finish() (or the destructor) clears the line on a terminal and draws the
// last state elsewhere, so nothing is printed after it on it.
class ProgressBar {
 public:
  static constexpr std::chrono::milliseconds kTerminalPeriod{200};
  static constexpr std::chrono::seconds kLogPeriod{10};

  explicit ProgressBar(bool enabled, const Clock* clock = nullptr);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  void update(size_t done, size_t total, const std::string& what);
  void finish();

 private:
  void draw();  // with mutex_ held
  void tick();  // the terminal's redraw thread
  double seconds_left() const;
  bool enabled_;
  bool terminal_;
  bool drawn_ = false;
  const Clock* clock_;
  SteadyClock steady_;
  int64_t start_ns_;
  std::chrono::steady_clock::time_point last_draw_{};
  size_t done_ = 0, total_ = 0;
  std::string what_;
  size_t drawn_done_ = 0;  // the state last drawn
  std::string drawn_what_;
  size_t width_ = 0;
  // Recent updates (clock ns, done): the rate the estimate comes from.
  std::deque<std::pair<int64_t, size_t>> recent_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread ticker_;
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
