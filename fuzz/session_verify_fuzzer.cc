// Fuzzes the response half of an HMAC session: an HmacSession built from
// fixed key material authorizes a fixed command through Tpm::run, and the
// fuzz input comes back as the response, through verify (rpHash, HMAC,
// continueSession) and, for encrypt sessions, parameter decryption.
//
// Input: one selector byte, then the response.
//   selector & 0x03  the command: 0 GetRandom (encrypt), 1 Hash (decrypt +
//                    encrypt, continueSession), 2 PCR_Read (audit +
//                    continueSession, authorizing nothing), 3 PCR_Extend
//                    (authorizing, one-shot)
//   selector & 0x80  "re-MAC": if the response frames as a success with one
//                    session entry and a 32-byte HMAC, the fuzzer replaces
//                    the HMAC with the valid one before delivering it, so the
//                    paths behind authentication (decryption, parameter
//                    parsing) see hostile but authenticated bytes.
//
// Besides the sanitizers it checks that no response is accepted unless the
// bytes delivered carry the right HMAC, computed here independently with
// OpenSSL (a random input never does), that an accepted response kept
// continueSession as sent, and that decrypted output equals an independent
// AES-128-CFB decryption.
//
// Seeds (one well-framed success per command, with and without re-MAC):
//   build-fuzz/fuzz/session_verify_fuzzer -max_total_time=30 fuzz/corpus_session_verify
// (copy the seeds to a scratch directory first to keep new units out of the tree).
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "testing/transport_doubles.h"
#include "tpmsec/bytes.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/response_code.h"
#include "tpmsec/session.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"
#include "tpmsec/wire.h"

namespace {

using namespace tpmsec;

constexpr uint32_t kSessionHandle = 0x02000000;

const Bytes& session_key() {
  static const Bytes k = [] {
    Bytes b(32);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(0xA0 + i);
    return b;
  }();
  return k;
}
const Bytes& nonce_tpm() {
  static const Bytes n(32, 0x7E);
  return n;
}
const Bytes& nonce_caller() {
  static const Bytes n(32, 0x3C);
  return n;
}

[[noreturn]] void die(const char* what, ByteView data) {
  std::fprintf(stderr, "session_verify_fuzzer: %s\nresponse: %s\n", what, to_hex(data).c_str());
  std::abort();
}

// A success response with one session entry, framed as the pipeline frames it
// (no response handles for the commands used here).
struct Framed {
  ByteView parameters;
  ByteView nonce;
  uint8_t attributes = 0;
  ByteView hmac;
  size_t hmac_offset = 0;
};

std::optional<Framed> frame(ByteView rsp) {
  Reader r(rsp);
  uint16_t tag = r.u16("tag");
  uint32_t size = r.u32("size");
  uint32_t code = r.u32("code");
  if (!r.ok() || tag != st::kSessions || size != rsp.size() || code != rc::kSuccess) return std::nullopt;
  uint32_t n = r.u32("parameterSize");
  Framed f;
  f.parameters = r.bytes(n, "parameters");
  f.nonce = r.tpm2b("nonce", 64);
  f.attributes = r.u8("attributes");
  f.hmac_offset = r.offset() + 2;
  f.hmac = r.tpm2b("hmac", 64);
  r.expect_end("response");
  if (!r.ok()) return std::nullopt;
  return f;
}

// The response HMAC (Part 1 §19.6.7), computed with OpenSSL directly: the
// oracle must not share code with what it checks.
Bytes expected_hmac(uint32_t command_code, const Framed& f) {
  uint8_t codes[8] = {0, 0, 0, 0};
  store_be32(codes + 4, command_code);
  uint8_t rp_hash[32];
  unsigned int len = 0;
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  EVP_DigestInit_ex(md, EVP_sha256(), nullptr);
  EVP_DigestUpdate(md, codes, 8);
  EVP_DigestUpdate(md, f.parameters.data(), f.parameters.size());
  EVP_DigestFinal_ex(md, rp_hash, &len);
  EVP_MD_CTX_free(md);
  Bytes msg(rp_hash, rp_hash + 32);
  msg.insert(msg.end(), f.nonce.begin(), f.nonce.end());
  msg.insert(msg.end(), nonce_caller().begin(), nonce_caller().end());
  msg.push_back(f.attributes);
  Bytes out(32);
  HMAC(EVP_sha256(), session_key().data(), static_cast<int>(session_key().size()), msg.data(), msg.size(), out.data(),
       &len);
  return out;
}

// AES-128-CFB decryption of a response parameter (Part 1 §21.3), independently.
Bytes expected_plaintext(ByteView ciphertext, ByteView nonce_tpm_new) {
  // KDFa(SHA-256, sessionKey, "CFB", nonceTPM_new, nonceCaller, 256): one HMAC block.
  Bytes in = {0, 0, 0, 1, 'C', 'F', 'B', 0};
  in.insert(in.end(), nonce_tpm_new.begin(), nonce_tpm_new.end());
  in.insert(in.end(), nonce_caller().begin(), nonce_caller().end());
  in.insert(in.end(), {0, 0, 1, 0});
  uint8_t key_iv[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), session_key().data(), static_cast<int>(session_key().size()), in.data(), in.size(), key_iv, &len);
  Bytes out(ciphertext.size());
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  int n = 0;
  EVP_DecryptInit_ex(c, EVP_aes_128_cfb128(), nullptr, key_iv, key_iv + 16);
  if (!ciphertext.empty()) EVP_DecryptUpdate(c, out.data(), &n, ciphertext.data(), static_cast<int>(ciphertext.size()));
  EVP_CIPHER_CTX_free(c);
  return out;
}

// Every nonceCaller the session draws is the fixed one the oracle uses.
class FixedNonce final : public crypto::RandomSource {
 public:
  Status fill(MutableByteView out) override {
    if (out.size() != nonce_caller().size()) return runtime_error("unexpected nonce size");
    std::copy(nonce_caller().begin(), nonce_caller().end(), out.begin());
    return ok_status();
  }
};

std::unique_ptr<HmacSession> make_session(uint8_t attributes) {
  static FixedNonce fixed;
  return std::make_unique<HmacSession>(nullptr, kSessionHandle, alg::kSha256, SymDef::aes128_cfb(),
                                       SecretBytes(session_key()), nonce_tpm(), Bytes(), attributes, &fixed);
}

// Runs `command` with one session over a transport answering `rsp`, and checks
// the outcome against the oracle; `check_success` checks a parsed success further.
template <class C, class F>
void run(const C& command, uint8_t attributes, ByteView rsp, F&& check_success) {
  std::unique_ptr<HmacSession> owned = make_session(attributes);
  HmacSession& session = *owned;
  // Answers with the input once; a retried command gets a transport error.
  testing::ScriptedTransport transport("fuzz");
  transport.set_recording(false);
  transport.push(Bytes(rsp.begin(), rsp.end()));
  Tpm tpm(transport);
  auto result = tpm.run(command, {Auth{&session, {}}});
  if (!result.ok()) {
    if (result.error().message().empty()) die("error without a message", rsp);
    if (result.error().kind() == ErrorKind::kIntegrity && session.usable()) {
      die("a response failed authentication but the session stays usable", rsp);
    }
    return;
  }
  std::optional<Framed> f = frame(rsp);
  if (!f) die("success on a response that does not frame as a success with one session", rsp);
  if (f->hmac.size() != 32 || !std::equal(f->hmac.begin(), f->hmac.end(), expected_hmac(C::kInfo.code, *f).begin())) {
    die("success on a response without a valid HMAC", rsp);
  }
  if ((f->attributes & attr::kContinueSession) != (attributes & attr::kContinueSession)) {
    die("success although the TPM changed continueSession", rsp);
  }
  if (session.nonce_tpm().size() != f->nonce.size() ||
      !std::equal(f->nonce.begin(), f->nonce.end(), session.nonce_tpm().begin())) {
    die("success without rolling nonceTPM to the response's", rsp);
  }
  check_success(*result, *f);
}

// The first response parameter's data when it is a TPM2B, decrypted independently.
Bytes first_tpm2b_plain(const Framed& f) {
  if (f.parameters.size() < 2) return {};
  size_t n = size_t{f.parameters[0]} << 8 | f.parameters[1];
  if (n > f.parameters.size() - 2) return {};
  return expected_plaintext(f.parameters.subspan(2, n), f.nonce);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = bytes[0];
  Bytes rsp(bytes + 1, bytes + size);
  // A retryable warning makes the pipeline sleep 20 ms before it retries: the
  // session has nothing to verify on an error, and response_fuzzer covers it.
  if (rsp.size() >= 10 && rc_is_retryable(load_be32(rsp.data() + 6))) return 0;

  static const uint32_t kCodes[] = {cc::kGetRandom, cc::kHash, cc::kPcrRead, cc::kPcrExtend};
  const int which = selector & 0x03;
  if (selector & 0x80) {
    if (auto f = frame(rsp); f && f->hmac.size() == 32) {
      Bytes mac = expected_hmac(kCodes[which], *f);
      std::memcpy(rsp.data() + f->hmac_offset, mac.data(), mac.size());
    }
  }

  switch (which) {
    case 0: {
      cmd::GetRandom c;
      c.bytes_requested = 16;
      run(c, attr::kEncrypt, rsp, [&](const cmd::GetRandom::Response& r, const Framed& f) {
        if (r.random_bytes.bytes != first_tpm2b_plain(f)) die("GetRandom decrypted differently from the oracle", rsp);
      });
      break;
    }
    case 1: {
      cmd::Hash c;
      c.data.bytes = {'a', 'b', 'c'};
      run(c, attr::kDecrypt | attr::kEncrypt | attr::kContinueSession, rsp,
          [&](const cmd::Hash::Response& r, const Framed& f) {
            if (r.out_hash.bytes != first_tpm2b_plain(f)) die("Hash decrypted differently from the oracle", rsp);
          });
      break;
    }
    case 2: {
      cmd::PcrRead c;
      c.pcr_selection_in.banks = {PcrSelection::single(alg::kSha256, 16)};
      run(c, attr::kAudit | attr::kContinueSession, rsp, [](const cmd::PcrRead::Response&, const Framed&) {});
      break;
    }
    default: {
      cmd::PcrExtend c;
      c.pcr_handle = NamedHandle::of(16);
      c.digests.digests.push_back(TaggedHash{alg::kSha256, Bytes(32, 0x11)});
      run(c, 0, rsp, [](const cmd::PcrExtend::Response&, const Framed&) {});
      break;
    }
  }
  return 0;
}
