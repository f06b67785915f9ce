// In-process libtpms (libtpms's TPMLIB_* API, libtpms/tpm_library.h).
#include <fcntl.h>
#include <libtpms/tpm_error.h>
#include <libtpms/tpm_library.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "startup.h"
#include "tpmsec/commands.h"
#include "tpmsec/host/files.h"
#include "tpmsec/response_code.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

// libtpms keeps its NV in blobs named "permall", "volatilestate", "savestate".
// They live here, and in state_dir when one is given.
struct NvStore {
  std::map<std::string, Bytes> blobs;
  std::string dir;
  std::string write_error;
};
NvStore g_nv;

files::StatePath blob_path(const char* name) { return {g_nv.dir, fmt::format("tpmsec-{}.blob", name)}; }

// Far above what libtpms keeps (its NV is 128 KiB); a larger file is not its state.
constexpr size_t kMaxBlobBytes = size_t{16} << 20;

TPM_RESULT nv_init() { return TPM_SUCCESS; }

TPM_RESULT nv_load(unsigned char** data, uint32_t* length, uint32_t, const char* name) {
  auto it = g_nv.blobs.find(name);
  if (it == g_nv.blobs.end()) return TPM_RETRY;  // missing: libtpms manufactures a fresh TPM
  *length = static_cast<uint32_t>(it->second.size());
  *data = static_cast<unsigned char*>(std::malloc(it->second.empty() ? 1 : it->second.size()));
  if (!*data) return TPM_FAIL;
  if (!it->second.empty()) std::memcpy(*data, it->second.data(), it->second.size());
  return TPM_SUCCESS;
}

TPM_RESULT nv_store(const unsigned char* data, uint32_t length, uint32_t, const char* name) {
  g_nv.blobs[name] = Bytes(data, data + length);
  if (g_nv.dir.empty()) return TPM_SUCCESS;
  // 0600 in the 0700 state directory, written whole or not at all; a link
  // planted at the name is replaced, never followed (files::write_private).
  Status st = files::write_private(blob_path(name), std::string_view(reinterpret_cast<const char*>(data), length));
  if (!st.ok()) {
    g_nv.write_error = st.error().message();
    return TPM_FAIL;
  }
  return TPM_SUCCESS;
}

TPM_RESULT nv_delete(uint32_t, const char* name, TPM_BOOL must_exist) {
  bool existed = g_nv.blobs.erase(name) > 0;
  if (!g_nv.dir.empty()) (void)files::remove_private(blob_path(name));
  return (must_exist && !existed) ? TPM_FAIL : TPM_SUCCESS;
}

// The locality libtpms runs commands at (TPM_MODIFIER_INDICATOR), set by
// embedded_set_locality.
std::atomic<uint32_t> g_locality{0};
TPM_RESULT io_init() { return TPM_SUCCESS; }
TPM_RESULT io_get_locality(TPM_MODIFIER_INDICATOR* locality, uint32_t) {
  *locality = g_locality;
  return TPM_SUCCESS;
}

std::atomic<bool> g_in_use{false};

class EmbeddedTransport final : public Transport {
 public:
  explicit EmbeddedTransport(std::string state_dir) : state_dir_(std::move(state_dir)) {}

  ~EmbeddedTransport() override {
    if (initialized_) {
      if (!state_dir_.empty()) {
        // An orderly shutdown lets the next process resume this TPM.
        (void)send_shutdown(*this, su::kState);
      }
      TPMLIB_Terminate();
    }
    std::free(buffer_);
    g_nv = NvStore{};
    g_locality = 0;
    g_in_use = false;
  }

  Status init() {
    g_nv = NvStore{};
    g_nv.dir = state_dir_;
    if (!state_dir_.empty()) {
      // The directory itself is created on first use; a missing parent is a
      // mistyped path, not a tree to make up (kUsage).
      std::error_code ec;
      std::filesystem::path dir = std::filesystem::path(state_dir_).lexically_normal();
      if (!dir.has_filename()) dir = dir.parent_path();  // "dir/"
      std::filesystem::path parent = dir.parent_path();
      if (parent.empty()) parent = ".";
      if (!std::filesystem::is_directory(dir, ec)) {
        if (std::filesystem::exists(dir, ec)) {
          return usage_error(fmt::format("embedded TPM state {}: not a directory", state_dir_));
        }
        if (!std::filesystem::is_directory(parent, ec)) {
          return usage_error(
              fmt::format("embedded TPM state {}: directory {} does not exist", state_dir_, parent.string()));
        }
      }
      // The seeds and secrets live here: a 0700 directory (created so, or an
      // existing one nobody else can write, in a directory nobody else can
      // swap it in), 0600 files, no symlink followed (files.h).
      TPMSEC_RETURN_IF_ERROR(files::make_private_dir(files::StatePath{state_dir_, ""}));
      for (const char* name : {"permall", "volatilestate", "savestate"}) {
        TPMSEC_ASSIGN_OR_RETURN(std::optional<std::string> blob, files::read_private(blob_path(name), kMaxBlobBytes));
        if (blob) g_nv.blobs[name] = Bytes(blob->begin(), blob->end());
      }
    }
    if (TPMLIB_ChooseTPMVersion(TPMLIB_TPM_VERSION_2) != TPM_SUCCESS) {
      return runtime_error("libtpms does not support TPM 2.0");
    }
    static libtpms_callbacks callbacks{};
    callbacks.sizeOfStruct = sizeof(callbacks);
    callbacks.tpm_nvram_init = nv_init;
    callbacks.tpm_nvram_loaddata = nv_load;
    callbacks.tpm_nvram_storedata = nv_store;
    callbacks.tpm_nvram_deletename = nv_delete;
    callbacks.tpm_io_init = io_init;
    callbacks.tpm_io_getlocality = io_get_locality;
    if (TPMLIB_RegisterCallbacks(&callbacks) != TPM_SUCCESS) return runtime_error("libtpms refused its NV callbacks");
    return power_on();
  }

  Result<Bytes> transmit(ByteView command) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialized_) return runtime_error("embedded TPM is not running");
    // TPMLIB_Process takes a non-const command buffer.
    Bytes copy(command.begin(), command.end());
    uint32_t length = 0;
    TPM_RESULT r = TPMLIB_Process(&buffer_, &length, &capacity_, copy.data(), static_cast<uint32_t>(copy.size()));
    if (r != TPM_SUCCESS) return runtime_error(fmt::format("libtpms failed to process a command (0x{:x})", r));
    if (!g_nv.write_error.empty()) return runtime_error("embedded TPM state: " + g_nv.write_error);
    return Bytes(buffer_, buffer_ + length);
  }

  Status reset_tpm() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (initialized_) TPMLIB_Terminate();
      initialized_ = false;
      // A reset loses volatile state; the permanent state (seeds, NV) stays.
      g_nv.blobs.erase("volatilestate");
      g_nv.blobs.erase("savestate");
    }
    return power_on(/*allow_resume=*/false);
  }

  Status suspend_resume() override {
    TPMSEC_RETURN_IF_ERROR(shutdown_state(*this));
    {
      std::lock_guard<std::mutex> lock(mu_);
      TPMLIB_Terminate();
      initialized_ = false;
    }
    if (TPMLIB_MainInit() != TPM_SUCCESS) return runtime_error("libtpms failed to initialise after suspend");
    initialized_ = true;
    TPMSEC_ASSIGN_OR_RETURN(uint32_t code, send_startup(*this, su::kState));
    if (code != rc::kSuccess) return runtime_error("Startup(STATE) failed: " + describe_rc(code));
    return ok_status();
  }

  // _TPM_Init alone (the platform's power-on or reset signal): the TPM then
  // waits for the client's Startup, as a chip does.
  Status tpm_init(bool delete_volatile) {
    std::lock_guard<std::mutex> lock(mu_);
    if (initialized_) TPMLIB_Terminate();
    initialized_ = false;
    if (delete_volatile) g_nv.blobs.erase("volatilestate");
    if (TPMLIB_MainInit() != TPM_SUCCESS) return runtime_error("libtpms failed to initialise (corrupt state?)");
    initialized_ = true;
    return ok_status();
  }

  // Power off: the TPM answers nothing until the next tpm_init.
  void power_off() {
    std::lock_guard<std::mutex> lock(mu_);
    if (initialized_) TPMLIB_Terminate();
    initialized_ = false;
  }

  std::string describe() const override { return embedded_tpm_string(state_dir_); }
  bool in_process() const override { return true; }
  bool outlives_process() const override { return !state_dir_.empty(); }

 private:
  Status power_on(bool allow_resume = true) {
    if (TPMLIB_MainInit() != TPM_SUCCESS) {
      return runtime_error(g_nv.write_error.empty() ? "libtpms failed to initialise (corrupt state?)"
                                                    : "libtpms failed to initialise: " + g_nv.write_error);
    }
    initialized_ = true;
    uint32_t code = 1;
    // With persisted state, resume what the last process shut down orderly;
    // a TPM that was not shut down orderly refuses and gets Startup(CLEAR).
    if (allow_resume && !state_dir_.empty() && g_nv.blobs.count("permall")) {
      TPMSEC_ASSIGN_OR_RETURN(code, send_startup(*this, su::kState));
    }
    if (code != rc::kSuccess) {
      TPMSEC_ASSIGN_OR_RETURN(code, send_startup(*this, su::kClear));
    }
    if (code != rc::kSuccess) return runtime_error("embedded TPM Startup failed: " + describe_rc(code));
    return ok_status();
  }

  std::string state_dir_;
  std::mutex mu_;
  bool initialized_ = false;
  unsigned char* buffer_ = nullptr;
  uint32_t capacity_ = 0;
};

}  // namespace

Status embedded_tpm_init(Transport& embedded, bool delete_volatile) {
  auto* e = dynamic_cast<EmbeddedTransport*>(&embedded);
  if (!e) return unsupported_error(embedded.describe() + " is not the embedded TPM");
  return e->tpm_init(delete_volatile);
}

Status embedded_power_off(Transport& embedded) {
  auto* e = dynamic_cast<EmbeddedTransport*>(&embedded);
  if (!e) return unsupported_error(embedded.describe() + " is not the embedded TPM");
  e->power_off();
  return ok_status();
}

Status embedded_set_locality(Transport& embedded, uint8_t locality) {
  if (!dynamic_cast<EmbeddedTransport*>(&embedded)) {
    return unsupported_error(embedded.describe() + " is not the embedded TPM");
  }
  if (locality > 4) return usage_error(fmt::format("locality {} is not 0..4", locality));
  g_locality = locality;
  return ok_status();
}

Result<std::unique_ptr<Transport>> open_embedded(const std::string& state_dir) {
  if (g_in_use.exchange(true)) {
    return runtime_error("the embedded TPM is already open in this process (libtpms is a singleton)");
  }
  auto t = std::make_unique<EmbeddedTransport>(state_dir);
  TPMSEC_RETURN_IF_ERROR(t->init());
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace tpmsec
