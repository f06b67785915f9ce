#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

namespace tpmsec::cli {
namespace {
std::atomic<bool> g_stop{false};
void on_sigint(int) { g_stop = true; }
}  // namespace

ProgressBar::ProgressBar() : enabled_(::isatty(2) != 0) {}

ProgressBar::~ProgressBar() {
  if (enabled_ && drawn_) fmt::print(stderr, "\r{:80}\r", "");
}

void ProgressBar::update(size_t done, size_t total, const std::string& what) {
  if (!enabled_ || total == 0) return;
  size_t width = 30, filled = std::min(width, done * width / total);
  fmt::print(stderr, "\r[{}{}] {:3}% {:<40}", std::string(filled, '#'), std::string(width - filled, '.'),
             std::min<size_t>(100, done * 100 / total), what.substr(0, 40));
  drawn_ = true;
}

// SIGTERM (systemd stopping a unit, kill) and SIGHUP (a closed terminal) stop
// a run as Ctrl-C does: sessions flushed, PCR reset, partial results kept.
StopOnInterrupt::StopOnInterrupt() {
  g_stop = false;
  for (size_t i = 0; i < kSignals.size(); ++i) previous_[i] = std::signal(kSignals[i], on_sigint);
}

StopOnInterrupt::~StopOnInterrupt() {
  for (size_t i = 0; i < kSignals.size(); ++i) std::signal(kSignals[i], previous_[i]);
}

const std::atomic<bool>* StopOnInterrupt::flag() const { return &g_stop; }

}  // namespace tpmsec::cli
