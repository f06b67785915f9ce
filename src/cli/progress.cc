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
  auto* yes =
      sub->add_flag("--progress", on, "Show progress and the TPM time left on stderr even when it is not a terminal");
  auto* no = sub->add_flag("--no-progress", off, "Show no progress, also on a terminal");
  yes->excludes(no);
}

bool ProgressFlags::enabled() const { return on || (!off && ::isatty(2) != 0); }

ProgressBar::ProgressBar(bool enabled, const Clock* clock)
    : enabled_(enabled), terminal_(::isatty(2) != 0), clock_(clock ? clock : &steady_), start_ns_(clock_->now_ns()) {
  if (enabled_ && terminal_) ticker_ = std::thread([this] { tick(); });
}

ProgressBar::~ProgressBar() { finish(); }

namespace {
std::string duration_text(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  if (seconds < 3600) return fmt::format("{}m{:02}s", int(seconds) / 60, int(seconds) % 60);
  return fmt::format("{}h{:02}m", int(seconds) / 3600, int(seconds) % 3600 / 60);
}

// The window the rate is taken over: long enough to smooth one slow command,
// short enough to follow a run whose phases differ (bench's strategies).
constexpr int64_t kRateWindowNs = 5'000'000'000;
}  // namespace

void ProgressBar::update(size_t done, size_t total, const std::string& what) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (what != what_) recent_.clear();  // another phase: its own rate
  done_ = done;
  total_ = total;
  what_ = what;
  int64_t now_ns = clock_->now_ns();
  recent_.emplace_back(now_ns, done);
  while (recent_.size() > 2 && now_ns - recent_[1].first >= kRateWindowNs) recent_.pop_front();
  auto now = std::chrono::steady_clock::now();
  bool last = total > 0 && done >= total;
  auto period = terminal_ ? std::chrono::duration_cast<std::chrono::steady_clock::duration>(kTerminalPeriod)
                          : std::chrono::duration_cast<std::chrono::steady_clock::duration>(kLogPeriod);
  if (drawn_ && !last && now - last_draw_ < period) return;
  draw();
}

double ProgressBar::seconds_left() const {
  if (total_ == 0 || done_ == 0 || done_ >= total_) return -1;
  const auto& [first_ns, first_done] = recent_.front();
  const auto& [last_ns, last_done] = recent_.back();
  // Items per second of clock time, between two updates of this phase: the
  // first item's time includes the set-up (a session, a key), so one alone
  // says nothing of the rest.
  if (recent_.size() < 2 || last_done <= first_done || last_ns <= first_ns) return -1;
  double rate = static_cast<double>(last_done - first_done) / (static_cast<double>(last_ns - first_ns) / 1e9);
  // Counting down from the last update: the clock went on since.
  double since_s = static_cast<double>(clock_->now_ns() - last_ns) / 1e9;
  return std::max(0.0, static_cast<double>(total_ - done_) / rate - since_s);
}

void ProgressBar::draw() {
  last_draw_ = std::chrono::steady_clock::now();
  double elapsed_s = static_cast<double>(clock_->now_ns() - start_ns_) / 1e9;
  std::string line;
  if (total_ > 0) {
    size_t width = 30, filled = std::min(width, done_ * width / total_);
    line = fmt::format("[{}{}] {:3}% {}/{} {}", std::string(filled, '#'), std::string(width - filled, '.'),
                       std::min<size_t>(100, done_ * 100 / total_), done_, total_, what_.substr(0, 30));
    if (double left = seconds_left(); left >= 0) line += fmt::format(", ~{} of TPM time left", duration_text(left));
  } else {
    line = fmt::format("[{}] {} {}", done_, what_.substr(0, 30),
                       done_ > 0 ? fmt::format(", {:.2f} ms each", elapsed_s * 1e3 / double(done_)) : "");
  }
  drawn_ = true;
  drawn_done_ = done_;
  drawn_what_ = what_;
  if (!terminal_) {
    // A log reads whole lines: no \r, no padding.
    fmt::print(stderr, "{}\n", line);
    return;
  }
  // Pad over what a longer earlier line left.
  size_t shown = line.size();
  if (line.size() < width_) line += std::string(width_ - line.size(), ' ');
  width_ = std::max(width_, shown);
  fmt::print(stderr, "\r{}", line);
}

void ProgressBar::tick() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, kTerminalPeriod, [this] { return stopping_; })) {
    if (drawn_) draw();
  }
}

void ProgressBar::finish() {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!drawn_) return;
  if (terminal_) {
    fmt::print(stderr, "\r{}\r", std::string(width_, ' '));
  } else if (done_ != drawn_done_ || what_ != drawn_what_) {
    draw();  // the last state, whatever the rate limit held back
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
