// Progress on long runs (a bar on stderr when it is a terminal) and Ctrl-C
// that stops a run cleanly (handles flushed, PCR reset, partial results).
#ifndef TPMSEC_SRC_CLI_PROGRESS_H_
#define TPMSEC_SRC_CLI_PROGRESS_H_

#include <array>
#include <atomic>
#include <csignal>
#include <string>

namespace tpmsec::cli {

class ProgressBar {
 public:
  // Drawn only when stderr is a terminal.
  ProgressBar();
  ~ProgressBar();
  void update(size_t done, size_t total, const std::string& what);

 private:
  bool enabled_;
  bool drawn_ = false;
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
