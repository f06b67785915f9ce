// The records of what front ends' Tpms hold on a TPM (held_handles.h), and
// how this host tells whether their processes still run (host_state.h).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

#include "state_file.h"
#include "tpmsec/host/file_host_state.h"

namespace tpmsec {
namespace {

template <typename T>
std::optional<T> number(const std::string& text) {
  T v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// "0x02000000 0x80000001:saved" and back.
std::string handles_text(const std::vector<HeldHandle>& handles) {
  std::string out;
  for (const HeldHandle& h : handles) {
    if (!out.empty()) out += ' ';
    out += fmt::format("0x{:08x}{}", h.handle, h.saved ? ":saved" : "");
  }
  return out;
}

std::optional<std::vector<HeldHandle>> handles_from(const std::string& text) {
  std::vector<HeldHandle> out;
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    HeldHandle h;
    if (word.size() > 10 && word.substr(10) == ":saved") {
      h.saved = true;
      word.resize(10);
    }
    auto value = state_file::handle_value(word);
    if (!value || !HandleLedger::tracked(*value)) return std::nullopt;
    h.handle = *value;
    out.push_back(h);
  }
  return out;
}

std::optional<HeldHandlesRecord> record_from(const std::string& text, const TpmId& tpm) {
  auto f = state_file::parse_lines(text);
  if (f["tpm"] != tpm.text || f["boot"].empty()) return std::nullopt;
  auto pid = number<int64_t>(f["pid"]);
  auto start = number<uint64_t>(f["start"]);
  auto ns = number<uint64_t>(f["pidns"]);
  auto context = number<uint64_t>(f["context"]);
  auto handles = handles_from(f["handles"]);
  if (!pid || *pid <= 0 || !start || !ns || !context || !handles) return std::nullopt;
  HeldHandlesRecord r;
  r.owner = {*pid, *start, *ns};
  r.context = *context;
  r.boot = f["boot"];
  r.handles = std::move(*handles);
  return r;
}

// Fields 3 (state) and 22 (starttime) of /proc/PID/stat, read after the
// command name's last ')': the name itself may hold spaces and parentheses.
struct ProcStat {
  char state = 0;
  uint64_t start = 0;
};
std::optional<ProcStat> proc_stat(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  ProcStat out;
  for (int n = 3; n <= 22 && fields >> field; ++n) {
    if (n == 3) out.state = field.empty() ? 0 : field[0];
    if (n == 22) {
      auto start = number<uint64_t>(field);
      if (!start) return std::nullopt;
      out.start = *start;
      return out;
    }
  }
  return std::nullopt;
}

uint64_t own_pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

files::StatePath FileHostState::held_handles_file(const TpmId& tpm, const HeldHandlesRecord& record) const {
  return {dir_, fmt::format("{}/{}-{}-{}-{}-{}", state_file::folder(StateRecord::kHeldHandles), tpm.key,
                            record.owner.pid_namespace, record.owner.pid, record.owner.start, record.context)};
}

std::vector<HeldHandlesRecord> FileHostState::held_handles(const TpmId& tpm) const {
  std::vector<HeldHandlesRecord> out;
  const files::StatePath dir{dir_, state_file::folder(StateRecord::kHeldHandles)};
  // A folder or record the state directory's rule refuses holds nothing to
  // flush: never a reason to flush (the refusal is said when it is written).
  auto names = files::list_private(dir);
  if (!names.ok()) return out;
  std::sort(names->begin(), names->end());
  const std::string prefix = tpm.key + "-";
  for (const std::string& name : *names) {
    if (name.rfind(prefix, 0) != 0) continue;
    const files::StatePath file{dir_, dir.below + "/" + name};
    auto text = state_file::read(file);
    if (!text.ok() || !*text) continue;
    auto record = record_from(**text, tpm);
    // Only under its own name: a record copied over another's is not its.
    if (record && held_handles_file(tpm, *record).below == file.below) out.push_back(std::move(*record));
  }
  return out;
}

Status FileHostState::put_held_handles(const TpmId& tpm, const HeldHandlesRecord& record) {
  const files::StatePath file = held_handles_file(tpm, record);
  if (record.handles.empty()) return status_of(files::remove_private(file));
  if (tpm.text.find('\n') != std::string::npos || record.boot.find('\n') != std::string::npos) {
    return usage_error("a TPM string or boot id with a newline cannot be kept");
  }
  return files::write_private(file,
                              fmt::format("tpm={}\nboot={}\npid={}\nstart={}\npidns={}\ncontext={}\nhandles={}\n",
                                          tpm.text, record.boot, record.owner.pid, record.owner.start,
                                          record.owner.pid_namespace, record.context, handles_text(record.handles)),
                              files::Durability::kProcessEnd);
}

Result<ProcessStamp> FileHostState::this_process() const {
  auto stat = proc_stat("self");
  if (!stat) return runtime_error("cannot tell when this process started (/proc/self/stat)");
  return ProcessStamp{static_cast<int64_t>(::getpid()), stat->start, own_pid_namespace()};
}

bool FileHostState::process_runs(const ProcessStamp& process) const {
  if (process.pid <= 0 || process.pid_namespace != own_pid_namespace()) return true;  // cannot be told
  auto stat = proc_stat(std::to_string(process.pid));
  if (!stat) {
    // /proc hides other users' processes when mounted hidepid=: a process
    // that exists but may not be signalled still runs.
    return ::kill(static_cast<pid_t>(process.pid), 0) != 0 && errno == EPERM;
  }
  return stat->start == process.start && stat->state != 'Z' && stat->state != 'X';
}

}  // namespace tpmsec
