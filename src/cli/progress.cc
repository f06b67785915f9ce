#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

namespace tpmsec::cli {
namespace {
std::atomic<bool> g_stop{false};
void on_sigint(int) { g_stop = true; }
}  // namespace

void ProgressFlags::add_to(CLI::App* sub) {
  auto* yes = sub->add_flag("--progress", on, "Show progress and the TPM time left on stderr even when it is not a terminal");
  auto* no = sub->add_flag("--no-progress", off, "Show no progress, also on a terminal");
  yes->excludes(no);
}

bool ProgressFlags::enabled() const { return on || (!off && ::isatty(2) != 0); }

ProgressBar::ProgressBar(bool enabled, const Clock* clock)
    : enabled_(enabled), terminal_(::isatty(2) != 0), clock_(clock ? clock : &steady_),
      start_ns_(clock_->now_ns()) {}

ProgressBar::~ProgressBar() { finish(); }

namespace {
std::string duration_text(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  if (seconds < 3600) return fmt::format("{}m{:02}s", int(seconds) / 60, int(seconds) % 60);
  return fmt::format("{}h{:02}m", int(seconds) / 3600, int(seconds) % 3600 / 60);
}
}  // namespace

void ProgressBar::update(size_t done, size_t total, const std::string& what) {
  if (!enabled_) return;
  done_ = done;
  total_ = total;
  what_ = what;
  auto now = std::chrono::steady_clock::now();
  bool last = total > 0 && done >= total;
  if (drawn_ && !last && now - last_draw_ < std::chrono::milliseconds(250)) return;
  last_draw_ = now;
  draw();
}

void ProgressBar::draw() {
  double elapsed_s = static_cast<double>(clock_->now_ns() - start_ns_) / 1e9;
  std::string line;
  if (total_ > 0) {
    size_t width = 30, filled = std::min(width, done_ * width / total_);
    line = fmt::format("[{}{}] {:3}% {}/{} {}", std::string(filled, '#'), std::string(width - filled, '.'),
                       std::min<size_t>(100, done_ * 100 / total_), done_, total_, what_.substr(0, 30));
    if (done_ > 0 && done_ < total_) {
      line += fmt::format(", ~{} of TPM time left", duration_text(elapsed_s / double(done_) * double(total_ - done_)));
    }
  } else {
    line = fmt::format("[{}] {} {}", done_, what_.substr(0, 30),
                       done_ > 0 ? fmt::format(", {:.2f} ms each", elapsed_s * 1e3 / double(done_)) : "");
  }
  // Pad over what a longer earlier line left.
  size_t shown = line.size();
  if (line.size() < width_) line += std::string(width_ - line.size(), ' ');
  width_ = std::max(width_, shown);
  fmt::print(stderr, "\r{}", line);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!enabled_ || !drawn_) return;
  if (terminal_) {
    fmt::print(stderr, "\r{}\r", std::string(width_, ' '));
  } else {
    draw();  // the last state, whatever the rate limit held back
    fmt::print(stderr, "\n");
  }
  drawn_ = false;
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
