#include "tpmsec/hmac_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "tpmsec/command_frame.h"
#include "tpmsec/response_code.h"
#include "tpmsec/salt.h"

namespace tpmsec {
namespace {

constexpr size_t kMinNonce = 16;
constexpr size_t kMaxNonce = 64;
constexpr size_t kMaxDigest = 64;  // SHA-512

// A cpHash's or an HMAC's message gathered into one buffer, hashed with one
// SHA-256 update instead of one per part (each update is a call and its
// bookkeeping: ~15 ns of a 3-block HMAC, docs/performance.md). Only what the
// frames hold goes in — handle names, parameters as sent, digests, nonces,
// attributes — and the frames' own buffers are not wiped either: nor is this.
// A message that does not fit is refused by add(); the caller then hashes the
// parts as they are.
class PublicMessage {
 public:
  bool add(std::initializer_list<ByteView> parts) {
    for (ByteView p : parts) {
      if (p.size() > sizeof(buf_) - size_) return false;
      if (!p.empty()) std::memcpy(buf_ + size_, p.data(), p.size());
      size_ += p.size();
    }
    return true;
  }
  ByteView view() const { return ByteView(buf_, size_); }

 private:
  // cpHash or rpHash, both nonces, the cipher sessions' nonceTPMs, the attributes.
  uint8_t buf_[kMaxDigest + 4 * kMaxNonce + 1];
  size_t size_ = 0;
};

// HMAC under `key` of `parts`, gathered when they fit (PublicMessage).
Status mac_public(const crypto::HmacKey& key, std::initializer_list<ByteView> parts, MutableByteView out) {
  PublicMessage message;
  if (!message.add(parts)) return key.mac(parts, out);
  return key.mac({message.view()}, out);
}

}  // namespace

Result<size_t> compute_cp_hash(uint16_t hash_alg, uint32_t command_code, std::span<const NamedHandle* const> handles,
                               ByteView parameters, MutableByteView out) {
  uint8_t cc_bytes[4];
  store_be32(cc_bytes, command_code);
  const ByteView cc(cc_bytes);
  // A short command (a PCR_Extend's 46 bytes) gathered: one SHA-256 update.
  // Its parts are the bytes sent on the bus (cipher text when encrypted).
  if (handles.size() <= 3) {
    PublicMessage message;
    bool fits = message.add({cc});
    for (const NamedHandle* handle : handles) fits = fits && message.add({handle->name});
    if (fits && message.add({parameters})) return crypto::hash_into(hash_alg, {message.view()}, out);
  }
  // Commands have at most three handles: one-shot hashing, no allocation.
  switch (handles.size()) {
    case 0:
      return crypto::hash_into(hash_alg, {cc, parameters}, out);
    case 1:
      return crypto::hash_into(hash_alg, {cc, handles[0]->name, parameters}, out);
    case 2:
      return crypto::hash_into(hash_alg, {cc, handles[0]->name, handles[1]->name, parameters}, out);
    case 3:
      return crypto::hash_into(hash_alg, {cc, handles[0]->name, handles[1]->name, handles[2]->name, parameters}, out);
    default:
      break;
  }
  crypto::Hasher h;
  TPMSEC_RETURN_IF_ERROR(h.init(hash_alg));
  h.update(cc);
  for (const NamedHandle* handle : handles) h.update(handle->name);
  h.update(parameters);
  TPMSEC_ASSIGN_OR_RETURN(Bytes digest, h.finish());
  if (out.size() < digest.size()) return usage_error("cpHash buffer smaller than the digest");
  std::copy(digest.begin(), digest.end(), out.begin());
  return digest.size();
}

Result<Bytes> compute_cp_hash(uint16_t hash_alg, uint32_t command_code, std::span<const NamedHandle* const> handles,
                              ByteView parameters) {
  uint8_t digest[kMaxDigest];
  TPMSEC_ASSIGN_OR_RETURN(size_t size, compute_cp_hash(hash_alg, command_code, handles, parameters, digest));
  return Bytes(digest, digest + size);
}

Result<size_t> compute_rp_hash(uint16_t hash_alg, uint32_t response_code, uint32_t command_code, ByteView parameters,
                               MutableByteView out) {
  uint8_t codes[8];
  store_be32(codes, response_code);
  store_be32(codes + 4, command_code);
  return crypto::hash_into(hash_alg, {ByteView(codes, 8), parameters}, out);
}

Result<Bytes> compute_rp_hash(uint16_t hash_alg, uint32_t response_code, uint32_t command_code, ByteView parameters) {
  uint8_t digest[kMaxDigest];
  TPMSEC_ASSIGN_OR_RETURN(size_t size, compute_rp_hash(hash_alg, response_code, command_code, parameters, digest));
  return Bytes(digest, digest + size);
}

ByteView trim_auth_value(ByteView auth_value) {
  size_t n = auth_value.size();
  while (n > 0 && auth_value[n - 1] == 0) --n;
  return auth_value.first(n);
}

Result<std::unique_ptr<HmacSession>> HmacSession::start(Tpm& tpm, const SessionOptions& options) {
  crypto::RandomSource& rng = options.random ? *options.random : crypto::system_random();
  auto digest_bytes = digest_size(options.auth_hash);
  if (!digest_bytes) return usage_error(fmt::format("unsupported session hash 0x{:04x}", options.auth_hash));
  if ((options.tpm_key == nullptr) != (options.tpm_key_public == nullptr)) {
    return usage_error("a salted session needs both the key handle and its public area");
  }

  cmd::StartAuthSession c;
  c.nonce_caller.bytes.resize(*digest_bytes);
  TPMSEC_RETURN_IF_ERROR(rng.fill(c.nonce_caller.bytes));
  SecretBytes salt;
  if (options.tpm_key) {
    TPMSEC_ASSIGN_OR_RETURN(SaltedSecret s, make_salt(*options.tpm_key_public, rng));
    salt = std::move(s.salt);
    c.encrypted_salt.bytes = std::move(s.encrypted_salt);
    c.tpm_key = *options.tpm_key;
  }
  if (options.bind) c.bind = *options.bind;
  c.session_type = se::kHmac;
  c.symmetric = options.symmetric;
  c.auth_hash = options.auth_hash;
  // The ledger checked the handle (an HMAC session, not one in use) and owns it.
  TPMSEC_ASSIGN_OR_RETURN(auto rsp, tpm.run(c));
  // Hold it first so every failure below flushes it.
  ScopedHandle owned(tpm, rsp.session_handle);
  const Bytes& nonce_tpm = rsp.nonce_tpm.bytes;
  if (nonce_tpm.size() < kMinNonce || nonce_tpm.size() > kMaxNonce) {
    return parse_error(fmt::format("StartAuthSession returned a {}-byte nonceTPM", nonce_tpm.size()));
  }

  SecretBytes session_key;
  if (options.tpm_key || options.bind) {
    SecretBytes key_input(trim_auth_value(options.bind ? options.bind_auth : ByteView()));
    key_input.append(salt.view());
    TPMSEC_ASSIGN_OR_RETURN(session_key, crypto::kdfa(options.auth_hash, key_input.view(), "ATH", nonce_tpm,
                                                      c.nonce_caller.bytes, *digest_bytes * 8));
  }
  auto session =
      std::make_unique<HmacSession>(&tpm, owned.release(), options.auth_hash, options.symmetric, std::move(session_key),
                                    nonce_tpm, options.bind ? options.bind->name : Bytes(), options.attributes,
                                    // Null: each command's nonceCaller from nonce_random(), as
                                    // SessionOptions::random says (the system RNG, rng, drew the
                                    // start's nonce and salt; per command it cost a RAND_bytes and
                                    // OpenSSL's getpid() system call).
                                    options.random);
  session->nonce_caller_ = c.nonce_caller.bytes;
  return session;
}

HmacSession::HmacSession(Tpm* tpm, uint32_t handle, uint16_t auth_hash, SymDef symmetric, SecretBytes session_key,
                         Bytes nonce_tpm, Bytes bind_name, uint8_t attributes, crypto::RandomSource* random)
    : auth_hash_(auth_hash),
      symmetric_(symmetric),
      session_key_(std::move(session_key)),
      nonce_tpm_(std::move(nonce_tpm)),
      bind_name_(std::move(bind_name)),
      attributes_(attributes),
      random_(random) {
  if (tpm) {
    handle_ = ScopedHandle(*tpm, handle);
  } else {
    released_handle_ = handle;
  }
}

HmacSession::~HmacSession() = default;

SecretBytes HmacSession::key_with(ByteView auth_value) const {
  SecretBytes key = session_key_.clone();
  key.append(trim_auth_value(auth_value));
  return key;
}

bool HmacSession::keyed_with(ByteView auth) const {
  // sessionKey never changes: only the (trimmed) authValue after it can.
  const size_t own = session_key_.size();
  return hmac_key_.ready() && last_hmac_key_.size() == own + auth.size() &&
         crypto::constant_time_equal(last_hmac_key_.view().subspan(own), auth);
}

Status HmacSession::key_for_command(ByteView auth) {
  if (keyed_with(auth)) return ok_status();
  // sessionKey || authValue into the last key's buffer: no allocation once
  // it has the size (resize() wipes a buffer it outgrows).
  last_hmac_key_.resize(session_key_.size() + auth.size());
  uint8_t* key = last_hmac_key_.data();
  if (!session_key_.empty()) std::memcpy(key, session_key_.view().data(), session_key_.size());
  if (!auth.empty()) std::memcpy(key + session_key_.size(), auth.data(), auth.size());
  Status keyed = hmac_key_.init(auth_hash_, last_hmac_key_.view());
  if (!keyed.ok()) last_hmac_key_.clear();
  return keyed;
}

Status HmacSession::begin_command() {
  if (!usable_) return integrity_error(fmt::format("session 0x{:08x} is no longer usable", handle()));
  nonce_caller_.resize(nonce_tpm_.size());
  // The calling thread's nonce source (a session may move between threads).
  return (random_ ? *random_ : crypto::nonce_random()).fill(nonce_caller_);
}

Result<Bytes> HmacSession::authorize(const AuthorizeInput& in) {
  uint8_t cp_hash[kMaxDigest];
  TPMSEC_ASSIGN_OR_RETURN(size_t cp_size,
                          compute_cp_hash(auth_hash_, in.info->code, in.handles, in.parameters, cp_hash));
  // A session bound to the entity it authorizes leaves the authValue out:
  // it is already in the session key (Part 1 §19.6.11).
  bool bound_to_entity = !bind_name_.empty() && in.entity && in.entity->name == bind_name_;
  // The key is prepared once and kept while the authValue stays the same.
  TPMSEC_RETURN_IF_ERROR(key_for_command(trim_auth_value(bound_to_entity ? ByteView() : in.auth_value)));
  sent_attributes_ = attributes_;
  uint8_t attrs = sent_attributes_;
  // The decrypt and encrypt sessions' nonces come before sessionAttributes
  // (Part 1 §19.6.5; the reference code's ComputeCommandHMAC, SessionProcess.c).
  uint8_t mac[kMaxDigest];
  TPMSEC_RETURN_IF_ERROR(mac_public(
      hmac_key_,
      {ByteView(cp_hash, cp_size), nonce_caller_, nonce_tpm_, in.decrypt_nonce, in.encrypt_nonce, ByteView(&attrs, 1)},
      mac));
  const ByteView hmac(mac, hmac_key_.digest_size());
  return write_auth_entry(AuthEntry{.handle = handle(), .nonce = nonce_caller_, .attributes = attrs, .hmac = hmac},
                          /*command=*/true);
}

Result<size_t> HmacSession::rp_hash(const VerifyInput& in, MutableByteView out) const {
  // Without parameters rpHash depends on the two codes alone: a session that
  // repeats a command (the extends of a log) hashes it once.
  const bool memo = in.parameters.empty();
  if (memo && rp_memo_.size != 0 && rp_memo_.response_code == in.response_code &&
      rp_memo_.command_code == in.info->code && out.size() >= rp_memo_.size) {
    std::memcpy(out.data(), rp_memo_.digest, rp_memo_.size);
    return size_t{rp_memo_.size};
  }
  TPMSEC_ASSIGN_OR_RETURN(size_t size,
                          compute_rp_hash(auth_hash_, in.response_code, in.info->code, in.parameters, out));
  if (memo && size <= sizeof(rp_memo_.digest)) {
    std::memcpy(rp_memo_.digest, out.data(), size);
    rp_memo_.response_code = in.response_code;
    rp_memo_.command_code = in.info->code;
    rp_memo_.size = static_cast<uint8_t>(size);
  }
  return size;
}

Result<size_t> HmacSession::response_mac(const VerifyInput& in, MutableByteView out) const {
  uint8_t rp[kMaxDigest];
  TPMSEC_ASSIGN_OR_RETURN(size_t rp_size, rp_hash(in, rp));
  uint8_t attrs = in.auth.attributes;  // as the TPM returned it (may add auditExclusive)
  const std::initializer_list<ByteView> parts{ByteView(rp, rp_size), in.auth.nonce, nonce_caller_, ByteView(&attrs, 1)};
  if (!in.new_auth_value) {
    if (!hmac_key_.ready()) return usage_error("a response HMAC before any command was authorized");
    TPMSEC_RETURN_IF_ERROR(mac_public(hmac_key_, parts, out));
    return hmac_key_.digest_size();
  }
  crypto::HmacKey changed;
  TPMSEC_RETURN_IF_ERROR(changed.init(auth_hash_, key_with(*in.new_auth_value).view()));
  TPMSEC_RETURN_IF_ERROR(changed.mac(parts, out));
  return changed.digest_size();
}

Result<Bytes> HmacSession::response_hmac(const VerifyInput& in) const {
  uint8_t mac[kMaxDigest];
  TPMSEC_ASSIGN_OR_RETURN(size_t size, response_mac(in, mac));
  return Bytes(mac, mac + size);
}

Status HmacSession::verify(const VerifyInput& in) {
  if (in.auth.nonce.size() < kMinNonce || in.auth.nonce.size() > kMaxNonce) {
    usable_ = false;
    return integrity_error(fmt::format("session 0x{:08x}: response nonce of {} bytes", handle(), in.auth.nonce.size()));
  }
  uint8_t expected[kMaxDigest];
  TPMSEC_ASSIGN_OR_RETURN(size_t size, response_mac(in, expected));
  if (!crypto::constant_time_equal(ByteView(expected, size), in.auth.hmac)) {
    usable_ = false;
    return integrity_error(fmt::format("response HMAC of session 0x{:08x} does not verify", handle()));
  }
  // Authenticated: the continueSession the TPM reports is what it did.
  if ((in.auth.attributes & attr::kContinueSession) != (sent_attributes_ & attr::kContinueSession)) {
    usable_ = false;
    return integrity_error(fmt::format("session 0x{:08x}: TPM changed continueSession", handle()));
  }
  nonce_tpm_.assign(in.auth.nonce.begin(), in.auth.nonce.end());
  key_confirmed_ = true;
  if (!(sent_attributes_ & attr::kContinueSession)) {
    // The TPM ended the session after this command (authenticated above).
    if (handle_) released_handle_ = handle_.forget();
    usable_ = false;
  }
  return ok_status();
}

Status HmacSession::encrypt_parameter(MutableByteView data, ByteView auth_value) {
  return crypt_parameter(data, auth_value, /*command_direction=*/true, /*encrypt=*/true);
}

Status HmacSession::decrypt_parameter(MutableByteView data, ByteView auth_value) {
  return crypt_parameter(data, auth_value, /*command_direction=*/false, /*encrypt=*/false);
}

Status HmacSession::crypt_parameter(MutableByteView data, ByteView auth_value, bool command_direction, bool encrypt) {
  // Command: newer = nonceCaller, older = nonceTPM; response: the reverse
  // (with the nonceTPM that came back with the response).
  ByteView newer = command_direction ? ByteView(nonce_caller_) : ByteView(nonce_tpm_);
  ByteView older = command_direction ? ByteView(nonce_tpm_) : ByteView(nonce_caller_);
  if (symmetric_.algorithm == alg::kXor) {
    return crypto::xor_obfuscate(symmetric_.key_bits, key_with(auth_value).view(), newer, older, data);
  }
  if (symmetric_.algorithm != alg::kAes || symmetric_.mode != alg::kCfb) {
    return unsupported_error("session symmetric algorithm is neither AES-CFB nor XOR");
  }
  size_t key_bytes = symmetric_.key_bits / 8;
  const auto bits = static_cast<uint32_t>(symmetric_.key_bits + 128);
  // sessionKey || authValue: the prepared key when it is the one the HMACs use.
  TPMSEC_ASSIGN_OR_RETURN(SecretBytes key_iv,
                          keyed_with(trim_auth_value(auth_value))
                              ? crypto::kdfa(hmac_key_, "CFB", newer, older, bits)
                              : crypto::kdfa(auth_hash_, key_with(auth_value).view(), "CFB", newer, older, bits));
  ByteView k = key_iv.view().first(key_bytes);
  ByteView iv = key_iv.view().subspan(key_bytes, 16);
  return encrypt ? crypto::aes_cfb_encrypt(k, iv, data) : crypto::aes_cfb_decrypt(k, iv, data);
}

void HmacSession::command_failed(uint32_t code) {
  // Error responses carry no session area: the nonces stay as they were, and
  // the TPM keeps the session even without continueSession (the owner flushes).
  // A session whose key no response has confirmed yet, in a command the TPM
  // rejected for a session's authorization, may hold a key an interposer
  // chose (its StartAuthSession answer is unauthenticated): never use it again.
  if (!key_confirmed_ && rc_failed_session(code)) usable_ = false;
}

Result<Context> HmacSession::save(Tpm& tpm) {
  TPMSEC_ASSIGN_OR_RETURN(auto rsp, tpm.run(cmd::ContextSave{NamedHandle::of(handle())}));
  return rsp.context;
}

Status HmacSession::load(Tpm& tpm, const Context& context) {
  if (context.saved_handle != handle()) {
    return usage_error(
        fmt::format("the context of 0x{:08x} is not session 0x{:08x}'s", context.saved_handle, handle()));
  }
  // The ledger insists the response names this session (Part 1 §30: a
  // session keeps its handle while saved). Whatever happens the session
  // stays owned, so flush() still ends it, loaded or saved.
  TPMSEC_RETURN_IF_ERROR(tpm.run(cmd::ContextLoad{context}));
  return ok_status();
}

Status HmacSession::flush() {
  usable_ = false;
  return handle_.flush();
}

void HmacSession::abandon() {
  if (handle_) released_handle_ = handle_.forget();
  usable_ = false;
}

}  // namespace tpmsec
