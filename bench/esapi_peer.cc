// The same salted-session PCR_Extends through tpm2-tss ESAPI and through
// tpmsec, both on one in-process libtpms, with per-operation wall time, CPU
// time, time inside libtpms, and the ratios. Run pinned to one CPU:
//
//   taskset -c 1 build-bench/bench/esapi_peer [--extends N] [--rounds R]
//
// Both sides reach the TPM through one tpmsec embedded transport (libtpms is
// a process singleton) wrapped in a TimingTransport, which measures the time
// inside TPMLIB_Process for each side. ESAPI gets it through a custom TCTI
// (EmbeddedTcti below) whose transmit() runs the command and whose receive()
// hands back the response.
//
// ESAPI side: CreatePrimary of the null-hierarchy ECC P-256 key (the template of
// Linux's drivers/char/tpm/tpm2-sessions.c), Esys_StartAuthSession salted with it (HMAC session,
// AES-128-CFB, SHA-256), continueSession, then N Esys_PCR_Extend of PCR 16.
// tpmsec side: SessionFactory::create + start(continueSession), then N
// pcr_extend of PCR 16. PCR 16 is reset before each side, and each side's
// final PCR value must equal the SHA-256 chain of the N digests; otherwise
// the program exits 1.
//
// Each round runs both sides; the table reports the median over the rounds.
// "host" is the CPU time outside libtpms: CPU time per extend times the share
// of wall time spent outside TPMLIB_Process (a CPU clock read per command
// would cost as much as a whole tpmsec extend).
#include <openssl/sha.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tcti.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "timing_transport.h"
#include "tpmsec/pcr.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/transport/transports.h"

namespace tpmsec::bench {
namespace {

constexpr uint32_t kPcr = 16;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "esapi_peer: %s\n", what.c_str());
  std::exit(1);
}
void check_rc(TSS2_RC rc, const char* what) {
  if (rc != TSS2_RC_SUCCESS) fail(std::string(what) + ": " + Tss2_RC_Decode(rc));
}
template <class T>
T check(Result<T> r, const char* what) {
  if (!r.ok()) fail(std::string(what) + ": " + r.error().message());
  return std::move(*r);
}
void check(const Status& s, const char* what) {
  if (!s.ok()) fail(std::string(what) + ": " + s.error().message());
}

int64_t process_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// ---- A TCTI around a tpmsec Transport ----

struct EmbeddedTcti {
  TSS2_TCTI_CONTEXT_COMMON_V2 common;  // first: ESAPI sees a TSS2_TCTI_CONTEXT*
  Transport* transport;
  Bytes response;
  bool response_pending;
};
constexpr uint64_t kTctiMagic = 0x7470'6d73'6563'7463ULL;  // "tpmsectc"

EmbeddedTcti* from(TSS2_TCTI_CONTEXT* context) { return reinterpret_cast<EmbeddedTcti*>(context); }

TSS2_RC tcti_transmit(TSS2_TCTI_CONTEXT* context, size_t size, const uint8_t* command) {
  EmbeddedTcti* t = from(context);
  if (t->response_pending) return TSS2_TCTI_RC_BAD_SEQUENCE;
  Result<Bytes> response = t->transport->transmit(ByteView(command, size));
  if (!response.ok()) return TSS2_TCTI_RC_IO_ERROR;
  t->response = std::move(*response);
  t->response_pending = true;
  return TSS2_RC_SUCCESS;
}

TSS2_RC tcti_receive(TSS2_TCTI_CONTEXT* context, size_t* size, uint8_t* response, int32_t) {
  EmbeddedTcti* t = from(context);
  if (!t->response_pending) return TSS2_TCTI_RC_BAD_SEQUENCE;
  if (size == nullptr) return TSS2_TCTI_RC_BAD_REFERENCE;
  if (response == nullptr) {  // a size query
    *size = t->response.size();
    return TSS2_RC_SUCCESS;
  }
  if (*size < t->response.size()) return TSS2_TCTI_RC_INSUFFICIENT_BUFFER;
  std::memcpy(response, t->response.data(), t->response.size());
  *size = t->response.size();
  t->response_pending = false;
  return TSS2_RC_SUCCESS;
}

void tcti_finalize(TSS2_TCTI_CONTEXT*) {}
TSS2_RC tcti_cancel(TSS2_TCTI_CONTEXT*) { return TSS2_TCTI_RC_NOT_IMPLEMENTED; }
TSS2_RC tcti_get_poll_handles(TSS2_TCTI_CONTEXT*, TSS2_TCTI_POLL_HANDLE*, size_t*) {
  return TSS2_TCTI_RC_NOT_IMPLEMENTED;
}
TSS2_RC tcti_set_locality(TSS2_TCTI_CONTEXT*, uint8_t locality) {
  return locality == 0 ? TSS2_RC_SUCCESS : TSS2_TCTI_RC_NOT_IMPLEMENTED;
}
TSS2_RC tcti_make_sticky(TSS2_TCTI_CONTEXT*, TPM2_HANDLE*, uint8_t) { return TSS2_TCTI_RC_NOT_IMPLEMENTED; }

void init_tcti(EmbeddedTcti& t, Transport& transport) {
  t = EmbeddedTcti{};
  t.common.v1.magic = kTctiMagic;
  t.common.v1.version = 2;
  t.common.v1.transmit = tcti_transmit;
  t.common.v1.receive = tcti_receive;
  t.common.v1.finalize = tcti_finalize;
  t.common.v1.cancel = tcti_cancel;
  t.common.v1.getPollHandles = tcti_get_poll_handles;
  t.common.v1.setLocality = tcti_set_locality;
  t.common.makeSticky = tcti_make_sticky;
  t.transport = &transport;
}

// ---- Digests and the expected PCR value ----

// SHA-256 straight from OpenSSL, independent of tpmsec's crypto.
Bytes sha256(ByteView a, ByteView b = {}) {
  Bytes in(a.begin(), a.end());
  in.insert(in.end(), b.begin(), b.end());
  Bytes out(SHA256_DIGEST_LENGTH);
  SHA256(in.data(), in.size(), out.data());
  return out;
}

std::vector<Bytes> make_digests(int n) {
  std::vector<Bytes> digests;
  for (int i = 0; i < n; ++i) {
    uint8_t be[4];
    store_be32(be, static_cast<uint32_t>(i));
    digests.push_back(sha256(as_bytes("tpmsec esapi_peer"), be));
  }
  return digests;
}

Bytes expected_pcr(const std::vector<Bytes>& digests) {
  Bytes pcr(32, 0);  // PCR 16 after PCR_Reset
  for (const Bytes& d : digests) pcr = sha256(pcr, d);
  return pcr;
}

// ---- One measured run ----

struct Measurement {
  double wall_ns = 0, cpu_ns = 0, tpm_ns = 0;  // per extend
  uint64_t commands = 0;
  double host_cpu_ns() const { return cpu_ns * (1 - tpm_ns / wall_ns); }
};

template <class ExtendAll>
Measurement measure(TimingTransport& timing, int n, ExtendAll&& extend_all) {
  timing.reset_counters();
  int64_t cpu_start = process_cpu_ns();
  Clock::time_point start = Clock::now();
  extend_all();
  double wall = static_cast<double>(elapsed_ns(start, Clock::now()));
  double cpu = static_cast<double>(process_cpu_ns() - cpu_start);
  Measurement m;
  m.wall_ns = wall / n;
  m.cpu_ns = cpu / n;
  m.tpm_ns = static_cast<double>(timing.inside_ns()) / n;
  m.commands = timing.commands();
  return m;
}

class EsapiSide {
 public:
  explicit EsapiSide(Transport& transport) {
    init_tcti(tcti_, transport);
    check_rc(Esys_Initialize(&esys_, reinterpret_cast<TSS2_TCTI_CONTEXT*>(&tcti_), nullptr), "Esys_Initialize");

    // The null primary: the template of Linux's drivers/char/tpm/tpm2-sessions.c.
    TPM2B_PUBLIC in_public{};
    TPMT_PUBLIC& p = in_public.publicArea;
    p.type = TPM2_ALG_ECC;
    p.nameAlg = TPM2_ALG_SHA256;
    p.objectAttributes = 0x00030472;
    p.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    p.parameters.eccDetail.symmetric.keyBits.aes = 128;
    p.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    p.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    p.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    p.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    TPM2B_SENSITIVE_CREATE in_sensitive{};
    TPM2B_DATA outside_info{};
    TPML_PCR_SELECTION creation_pcr{};
    TPM2B_PUBLIC* out_public = nullptr;
    TPM2B_CREATION_DATA* creation_data = nullptr;
    TPM2B_DIGEST* creation_hash = nullptr;
    TPMT_TK_CREATION* creation_ticket = nullptr;
    check_rc(Esys_CreatePrimary(esys_, ESYS_TR_RH_NULL, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &in_sensitive,
                                &in_public, &outside_info, &creation_pcr, &primary_, &out_public, &creation_data,
                                &creation_hash, &creation_ticket),
             "Esys_CreatePrimary");
    Esys_Free(out_public);
    Esys_Free(creation_data);
    Esys_Free(creation_hash);
    Esys_Free(creation_ticket);
  }
  ~EsapiSide() {
    if (session_ != ESYS_TR_NONE) Esys_FlushContext(esys_, session_);
    if (primary_ != ESYS_TR_NONE) Esys_FlushContext(esys_, primary_);
    Esys_Finalize(&esys_);
  }

  // Esys_StartAuthSession salted with the null primary.
  void start_session() {
    if (session_ != ESYS_TR_NONE) check_rc(Esys_FlushContext(esys_, session_), "Esys_FlushContext");
    session_ = ESYS_TR_NONE;
    TPMT_SYM_DEF symmetric{};
    symmetric.algorithm = TPM2_ALG_AES;
    symmetric.keyBits.aes = 128;
    symmetric.mode.aes = TPM2_ALG_CFB;
    check_rc(Esys_StartAuthSession(esys_, primary_, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, nullptr,
                                   TPM2_SE_HMAC, &symmetric, TPM2_ALG_SHA256, &session_),
             "Esys_StartAuthSession");
    check_rc(Esys_TRSess_SetAttributes(esys_, session_, TPMA_SESSION_CONTINUESESSION, 0xff),
             "Esys_TRSess_SetAttributes");
  }

  void extend(const Bytes& digest) {
    TPML_DIGEST_VALUES values{};
    values.count = 1;
    values.digests[0].hashAlg = TPM2_ALG_SHA256;
    std::memcpy(values.digests[0].digest.sha256, digest.data(), 32);
    check_rc(Esys_PCR_Extend(esys_, ESYS_TR_PCR16, session_, ESYS_TR_NONE, ESYS_TR_NONE, &values), "Esys_PCR_Extend");
  }

  Bytes read_pcr() {
    TPML_PCR_SELECTION selection{};
    selection.count = 1;
    selection.pcrSelections[0].hash = TPM2_ALG_SHA256;
    selection.pcrSelections[0].sizeofSelect = 3;
    selection.pcrSelections[0].pcrSelect[kPcr / 8] = 1 << (kPcr % 8);
    UINT32 update_counter = 0;
    TPML_PCR_SELECTION* selection_out = nullptr;
    TPML_DIGEST* values = nullptr;
    check_rc(Esys_PCR_Read(esys_, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &selection, &update_counter, &selection_out,
                           &values),
             "Esys_PCR_Read");
    if (values->count != 1 || values->digests[0].size != 32) fail("Esys_PCR_Read returned an unexpected selection");
    Bytes out(values->digests[0].buffer, values->digests[0].buffer + 32);
    Esys_Free(selection_out);
    Esys_Free(values);
    return out;
  }

 private:
  EmbeddedTcti tcti_;
  ESYS_CONTEXT* esys_ = nullptr;
  ESYS_TR primary_ = ESYS_TR_NONE;
  ESYS_TR session_ = ESYS_TR_NONE;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Column {
  std::vector<double> wall, cpu, tpm, host;
  void add(const Measurement& m) {
    wall.push_back(m.wall_ns);
    cpu.push_back(m.cpu_ns);
    tpm.push_back(m.tpm_ns);
    host.push_back(m.host_cpu_ns());
  }
};

void print_row(const char* name, double wall, double cpu, double tpm, double host) {
  std::printf("%-28s %12.2f %12.2f %12.2f %12.2f\n", name, wall / 1e3, cpu / 1e3, tpm / 1e3, host / 1e3);
}

int run(int n, int rounds) {
  auto embedded = check(open_embedded(), "open_embedded");
  TimingTransport timing(*embedded);
  Tpm tpm(timing);

  std::vector<Bytes> digests = make_digests(n);
  const Bytes expected = expected_pcr(digests);

  EsapiSide esapi(timing);
  ProtectionConfig measuring;
  measuring.trust_first_use = true;  // measurement: the embedded TPM behind a timing decorator
  auto factory = check(SessionFactory::create(tpm, measuring), "SessionFactory::create");

  Column esapi_extend, tpmsec_extend;
  std::vector<double> esapi_start_cpu, tpmsec_start_cpu;
  for (int round = 0; round < rounds; ++round) {
    // ESAPI.
    check(pcr_reset(tpm, kPcr), "PCR_Reset");
    int64_t t = process_cpu_ns();
    esapi.start_session();
    esapi_start_cpu.push_back(static_cast<double>(process_cpu_ns() - t));
    Measurement e = measure(timing, n, [&] {
      for (const Bytes& d : digests) esapi.extend(d);
    });
    if (e.commands != static_cast<uint64_t>(n)) fail("ESAPI sent more than one command per extend");
    if (esapi.read_pcr() != expected) fail("ESAPI: PCR 16 is not the chain of the digests");
    esapi_extend.add(e);

    // tpmsec.
    check(pcr_reset(tpm, kPcr), "PCR_Reset");
    t = process_cpu_ns();
    auto session = check(factory->start(attr::kContinueSession), "SessionFactory::start");
    tpmsec_start_cpu.push_back(static_cast<double>(process_cpu_ns() - t));
    Auth auth{session.get(), {}};
    Measurement s = measure(timing, n, [&] {
      for (const Bytes& d : digests) check(pcr_extend(tpm, alg::kSha256, kPcr, d, auth), "pcr_extend");
    });
    if (s.commands != static_cast<uint64_t>(n)) fail("tpmsec sent more than one command per extend");
    if (check(pcr_read(tpm, alg::kSha256, kPcr), "PCR_Read") != expected) {
      fail("tpmsec: PCR 16 is not the chain of the digests");
    }
    tpmsec_extend.add(s);
    session.reset();

    std::printf("round %d: ESAPI %.1f µs/extend (CPU %.1f), tpmsec %.2f µs/extend (CPU %.2f); PCR 16 verified\n",
                round + 1, e.wall_ns / 1e3, e.cpu_ns / 1e3, s.wall_ns / 1e3, s.cpu_ns / 1e3);
  }

  double ew = median(esapi_extend.wall), ec = median(esapi_extend.cpu), et = median(esapi_extend.tpm),
         eh = median(esapi_extend.host);
  double sw = median(tpmsec_extend.wall), sc = median(tpmsec_extend.cpu), st = median(tpmsec_extend.tpm),
         sh = median(tpmsec_extend.host);
  std::printf("\n%d salted-session PCR_Extends of PCR 16 per side, median of %d rounds (µs per extend)\n", n, rounds);
  std::printf("%-28s %12s %12s %12s %12s\n", "", "wall", "CPU", "in libtpms", "host CPU");
  print_row("tpm2-tss ESAPI (Esys_*)", ew, ec, et, eh);
  print_row("tpmsec", sw, sc, st, sh);
  std::printf("%-28s %11.0fx %11.0fx %12s %11.0fx\n", "ratio ESAPI / tpmsec", ew / sw, ec / sc, "", eh / sh);
  std::printf(
      "\nsalted session start, CPU µs (median): ESAPI %.0f (StartAuthSession, key loaded), "
      "tpmsec %.0f (ContextLoad + StartAuthSession + FlushContext)\n",
      median(esapi_start_cpu) / 1e3, median(tpmsec_start_cpu) / 1e3);
  return 0;
}

}  // namespace
}  // namespace tpmsec::bench

int main(int argc, char** argv) {
  int n = 1000, rounds = 3;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--extends" && i + 1 < argc) {
      n = std::atoi(argv[++i]);
    } else if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: esapi_peer [--extends N] [--rounds R]\n");
      return 2;
    }
  }
  if (n < 1 || rounds < 1) {
    std::fprintf(stderr, "esapi_peer: --extends and --rounds must be positive\n");
    return 2;
  }
  return tpmsec::bench::run(n, rounds);
}
