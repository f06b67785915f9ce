#include "support/attacker.h"

#include <fmt/format.h>

#include <algorithm>

#include "tpmsec/commands.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/null_key.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec::testing {
namespace {

// The base point of NIST P-256 (FIPS 186-4 §D.1.2.3): d·G is the attacker's public key.
constexpr std::string_view kP256Gx = "6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296";
constexpr std::string_view kP256Gy = "4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5";

// Context blobs the attacker hands out: this marker, then the handle.
constexpr std::string_view kContextMarker = "tpmsec-test: an attacker's context";

Bytes random_bytes(size_t n) {
  Bytes b(n);
  (void)crypto::system_random().fill(b);
  return b;
}

// The data bytes of the TPM2B that starts the parameter area.
Result<MutableByteView> first_tpm2b(Bytes& parameters) {
  if (parameters.size() < 2) return parse_error("no first parameter");
  size_t size = size_t{parameters[0]} << 8 | parameters[1];
  if (size > parameters.size() - 2) return parse_error("first parameter overruns the parameters");
  return MutableByteView(parameters).subspan(2, size);
}

Reply answer(ResponseFrame frame) { return Reply::answer(build_response(frame)); }

// A success response to `frame` with `handles` and `parameters`, a password
// entry for each session the command carried.
Reply answer_success(const CommandFrame& frame, std::vector<uint32_t> handles, Bytes parameters) {
  ResponseFrame r;
  r.handles = std::move(handles);
  r.parameters = std::move(parameters);
  r.sessions.assign(frame.sessions.size(), password_response_entry());
  return answer(std::move(r));
}

}  // namespace

Result<std::unique_ptr<NullKeyAttacker>> NullKeyAttacker::create(AttackerOptions options) {
  std::unique_ptr<NullKeyAttacker> a(new NullKeyAttacker(std::move(options)));
  a->next_session_ = a->options_.first_session_handle;
  TPMSEC_ASSIGN_OR_RETURN(a->private_key_, crypto::ecc_generate_private(curve::kNistP256, crypto::system_random()));
  TPMSEC_ASSIGN_OR_RETURN(Bytes gx, from_hex(kP256Gx));
  TPMSEC_ASSIGN_OR_RETURN(Bytes gy, from_hex(kP256Gy));
  // ECDH with the base point as the peer: the "ephemeral" public key is d·G.
  TPMSEC_ASSIGN_OR_RETURN(crypto::EcdhShared own,
                          crypto::ecdh_ephemeral(curve::kNistP256, crypto::EccPoint{gx, gy}, a->private_key_.view()));
  a->public_ = null_key_template(SaltKind::kEcc);
  a->public_.unique_x = own.ephemeral_public.x;
  a->public_.unique_y = own.ephemeral_public.y;
  TPMSEC_ASSIGN_OR_RETURN(a->name_, compute_name(a->public_));
  return a;
}

Rule NullKeyAttacker::rule() {
  return [this](const ProxiedCommand& command, Upstream& tpm) { return handle(command, tpm); };
}

Reply NullKeyAttacker::handle(const ProxiedCommand& command, Upstream& tpm) {
  auto frame = parse_command(command.bytes);
  if (!frame.ok()) return pass(command, tpm);  // nothing the attacker understands: let the TPM judge it
  auto reply = dispatch(*frame, command, tpm);
  if (!reply.ok()) {
    if (error_.empty()) error_ = fmt::format("command {}: {}", command.index, reply.error().message());
    return Reply::close();
  }
  return std::move(*reply);
}

Result<Reply> NullKeyAttacker::dispatch(const CommandFrame& frame, const ProxiedCommand& command, Upstream& tpm) {
  const uint32_t first_handle = frame.handles.empty() ? 0 : frame.handles[0];
  switch (frame.code) {
    case cc::kCreatePrimary:
      if (first_handle == options_.hierarchy) return create_primary(frame, command, tpm);
      break;
    case cc::kStartAuthSession:
      if (first_handle == options_.object_handle) return start_auth_session(frame);
      break;
    case cc::kContextSave:
      if (owns(first_handle)) return context_save(frame, first_handle);
      break;
    case cc::kContextLoad: {
      TPMSEC_ASSIGN_OR_RETURN(Context c, unmarshal_exact<Context>(frame.parameters, "ContextLoad parameters"));
      const Bytes& blob = c.blob;
      if (blob.size() == kContextMarker.size() + 4 &&
          std::equal(kContextMarker.begin(), kContextMarker.end(), blob.begin())) {
        uint32_t h = load_be32(blob.data() + kContextMarker.size());
        if (owns(h)) {
          if (h == options_.object_handle) object_loaded_ = true;
          return answer_success(frame, {h}, {});
        }
      }
      break;
    }
    case cc::kFlushContext: {
      TPMSEC_ASSIGN_OR_RETURN(uint32_t h, unmarshal_exact<uint32_t>(frame.parameters, "FlushContext parameters"));
      if (owns(h)) {
        sessions_.erase(h);
        if (h == options_.object_handle) object_loaded_ = false;
        return answer_success(frame, {}, {});
      }
      break;
    }
    case cc::kReadPublic:
      if (first_handle == options_.object_handle) {
        Writer w;
        marshal(w, PublicArea{public_});
        w.tpm2b(name_, "name");
        w.tpm2b(name_, "qualifiedName");
        return answer_success(frame, {}, *w.finish());
      }
      break;
    case cc::kGetCapability:
      if (frame.sessions.empty()) return list_with_fakes(frame, command, tpm);
      break;
    default:
      break;
  }
  for (const SessionEntry& e : frame.sessions) {
    if (sessions_.count(e.handle)) return in_fake_sessions(frame, tpm);
  }
  if (frame.code == cc::kPcrExtend && !options_.substitute_digest.empty()) {
    CommandFrame forwarded = frame;
    TPMSEC_ASSIGN_OR_RETURN(forwarded.parameters, substitute_digests(frame.parameters));
    ++counters_.extends_substituted;
    TPMSEC_ASSIGN_OR_RETURN(Bytes response, tpm.transmit(build_command(forwarded)));
    return Reply::answer(std::move(response));
  }
  return pass(command, tpm);
}

Result<Reply> NullKeyAttacker::list_with_fakes(const CommandFrame& frame, const ProxiedCommand& command,
                                               Upstream& tpm) {
  Reply genuine = pass(command, tpm);
  cmd::GetCapability c;
  Reader asked(frame.parameters);
  unmarshal_all(asked, std::tie(c.capability, c.property, c.property_count));
  asked.expect_end("GetCapability parameters");
  TPMSEC_RETURN_IF_ERROR(asked.status());
  if (c.capability != cap::kHandles || !genuine.response) return genuine;
  TPMSEC_ASSIGN_OR_RETURN(ResponseFrame r, parse_response(*genuine.response, frame.code));
  if (r.code != rc::kSuccess) return genuine;
  Reader in(r.parameters);
  cmd::GetCapability::Response listing;
  unmarshal_all(in, listing.params());
  in.expect_end("GetCapability parameters");
  TPMSEC_RETURN_IF_ERROR(in.status());
  // The attacker's handles of the range asked for, as if the TPM held them.
  std::vector<uint32_t>& handles = listing.capability_data.handles;
  std::vector<uint32_t> fakes;
  if (object_loaded_) fakes.push_back(options_.object_handle);
  for (const auto& [h, s] : sessions_) fakes.push_back(h);
  for (uint32_t h : fakes) {
    if ((h >> 24) == (c.property >> 24) && h >= c.property) handles.push_back(h);
  }
  std::sort(handles.begin(), handles.end());
  handles.erase(std::unique(handles.begin(), handles.end()), handles.end());
  if (handles.size() > c.property_count) handles.resize(c.property_count);
  Writer w;
  marshal(w, listing.more_data);
  marshal(w, listing.capability_data);
  r.parameters = *w.finish();
  return Reply::answer(build_response(r));
}

Result<Reply> NullKeyAttacker::create_primary(const CommandFrame& frame, const ProxiedCommand& command, Upstream& tpm) {
  Reader r(frame.parameters);
  SensitiveCreate sensitive;
  PublicArea in_public;
  unmarshal(r, sensitive);
  unmarshal(r, in_public);
  TPMSEC_RETURN_IF_ERROR(r.status());
  const Public& asked = in_public.public_area;
  // The attacker's key is P-256; anything else goes to the TPM.
  if (asked.type != alg::kEcc || asked.curve != curve::kNistP256) return pass(command, tpm);
  if (options_.hierarchy != rh::kNull) {
    // Whatever template was asked (the EK's), with the attacker's point.
    Public own = asked;
    own.unique_x = public_.unique_x;
    own.unique_y = public_.unique_y;
    TPMSEC_ASSIGN_OR_RETURN(name_, compute_name(own));
    public_ = std::move(own);
  }
  Writer w;
  marshal(w, PublicArea{public_});
  w.tpm2b({}, "creationData");  // opaque to the client
  TPMSEC_ASSIGN_OR_RETURN(Bytes creation_hash, crypto::hash(alg::kSha256, {}));
  w.tpm2b(creation_hash, "creationHash");
  marshal(w, Ticket{st::kCreation, rh::kNull, {}});
  w.tpm2b(name_, "name");
  ++counters_.keys_substituted;
  object_loaded_ = true;
  return answer_success(frame, {options_.object_handle}, *w.finish());
}

Result<Reply> NullKeyAttacker::start_auth_session(const CommandFrame& frame) {
  Reader r(frame.parameters);
  ByteView nonce_caller = r.tpm2b("nonceCaller", 64);
  Reader salt_area = r.sized("encryptedSalt", 512);
  crypto::EccPoint q_e;
  ByteView x = salt_area.tpm2b("Q_e.x", 66), y = salt_area.tpm2b("Q_e.y", 66);
  q_e.x.assign(x.begin(), x.end());
  q_e.y.assign(y.begin(), y.end());
  salt_area.expect_end("encryptedSalt");
  r.absorb(salt_area);
  r.u8("sessionType");
  FakeSession s;
  unmarshal(r, s.symmetric);
  s.auth_hash = r.u16("authHash");
  r.expect_end("StartAuthSession parameters");
  TPMSEC_RETURN_IF_ERROR(r.status());
  auto digest_bytes = digest_size(s.auth_hash);
  if (!digest_bytes) return unsupported_error("session hash");

  // Z = x(d_key · Q_e): the same point the client computed as x(d_e · Q_key).
  TPMSEC_ASSIGN_OR_RETURN(crypto::EcdhShared shared,
                          crypto::ecdh_ephemeral(curve::kNistP256, q_e, private_key_.view()));
  TPMSEC_ASSIGN_OR_RETURN(SecretBytes salt, crypto::kdfe(public_.name_alg, shared.z.view(), "SECRET", q_e.x,
                                                         public_.unique_x, 8u * *digest_size(public_.name_alg)));
  ++counters_.salts_recovered;
  s.nonce_tpm = random_bytes(*digest_bytes);
  // Unbound (bindAuth empty): sessionKey = KDFa(authHash, salt, "ATH", nonceTPM, nonceCaller).
  TPMSEC_ASSIGN_OR_RETURN(s.key,
                          crypto::kdfa(s.auth_hash, salt.view(), "ATH", s.nonce_tpm, nonce_caller, 8u * *digest_bytes));
  uint32_t handle = next_session_++;
  Writer w;
  w.tpm2b(s.nonce_tpm, "nonceTPM");
  sessions_[handle] = std::move(s);
  return answer_success(frame, {handle}, *w.finish());
}

Result<Reply> NullKeyAttacker::context_save(const CommandFrame& frame, uint32_t handle) {
  Context c;
  c.sequence = context_sequence_++;
  c.saved_handle = handle;
  c.hierarchy = rh::kNull;
  c.blob.assign(kContextMarker.begin(), kContextMarker.end());
  Bytes h = be32(handle);
  c.blob.insert(c.blob.end(), h.begin(), h.end());
  TPMSEC_ASSIGN_OR_RETURN(Bytes marshalled, marshal_to_bytes(c));
  return answer_success(frame, {}, std::move(marshalled));
}

Status NullKeyAttacker::crypt(FakeSession& s, MutableByteView data, ByteView newer, ByteView older, bool encrypt) {
  // The entity's authValue is empty for everything tpmsec protects (PCRs,
  // the null hierarchy), so the key is the session key alone.
  if (s.symmetric.algorithm == alg::kXor) {
    return crypto::xor_obfuscate(s.symmetric.key_bits, s.key.view(), newer, older, data);
  }
  if (s.symmetric.algorithm != alg::kAes || s.symmetric.mode != alg::kCfb) {
    return unsupported_error("session cipher");
  }
  size_t key_bytes = s.symmetric.key_bits / 8;
  TPMSEC_ASSIGN_OR_RETURN(SecretBytes key_iv, crypto::kdfa(s.auth_hash, s.key.view(), "CFB", newer, older,
                                                           static_cast<uint32_t>(s.symmetric.key_bits + 128)));
  ByteView k = key_iv.view().first(key_bytes);
  ByteView iv = key_iv.view().subspan(key_bytes, 16);
  return encrypt ? crypto::aes_cfb_encrypt(k, iv, data) : crypto::aes_cfb_decrypt(k, iv, data);
}

Result<Bytes> NullKeyAttacker::substitute_digests(ByteView parameters) {
  TPMSEC_ASSIGN_OR_RETURN(DigestValues values, unmarshal_exact<DigestValues>(parameters, "PCR_Extend parameters"));
  for (TaggedHash& d : values.digests) {
    if (d.digest.size() == options_.substitute_digest.size()) d.digest = options_.substitute_digest;
  }
  return marshal_to_bytes(values);
}

Result<Reply> NullKeyAttacker::in_fake_sessions(const CommandFrame& frame, Upstream& tpm) {
  const CommandInfo* info = find_command(frame.code);
  if (!info) return parse_error("unknown command");
  for (const SessionEntry& e : frame.sessions) {
    if (e.handle != rh::kPasswordSession && !sessions_.count(e.handle)) {
      return unsupported_error("a command mixing the attacker's sessions with the TPM's");
    }
  }
  // Undo the client's parameter encryption.
  CommandFrame forwarded = frame;
  for (const SessionEntry& e : frame.sessions) {
    if (!(e.attributes & attr::kDecrypt) || !sessions_.count(e.handle)) continue;
    FakeSession& s = sessions_.at(e.handle);
    TPMSEC_ASSIGN_OR_RETURN(MutableByteView data, first_tpm2b(forwarded.parameters));
    TPMSEC_RETURN_IF_ERROR(crypt(s, data, e.nonce, s.nonce_tpm, /*encrypt=*/false));
  }
  if (frame.code == cc::kPcrExtend && !options_.substitute_digest.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(forwarded.parameters, substitute_digests(forwarded.parameters));
    ++counters_.extends_substituted;
  }
  // The TPM gets the command with password authorization (empty authValue).
  SessionEntry password;
  password.handle = rh::kPasswordSession;
  password.attributes = attr::kContinueSession;
  forwarded.sessions.assign(info->auth_count, password);
  TPMSEC_ASSIGN_OR_RETURN(Bytes genuine, tpm.transmit(build_command(forwarded)));
  if (response_code_of(genuine) != rc::kSuccess) return Reply::answer(std::move(genuine));
  TPMSEC_ASSIGN_OR_RETURN(ResponseFrame response, parse_response(genuine, frame.code));

  // The TPM's answer as the client's sessions would have produced it.
  std::vector<Bytes> nonces(frame.sessions.size());
  for (size_t i = 0; i < frame.sessions.size(); ++i) {
    auto it = sessions_.find(frame.sessions[i].handle);
    if (it != sessions_.end()) nonces[i] = random_bytes(it->second.nonce_tpm.size());
  }
  for (size_t i = 0; i < frame.sessions.size(); ++i) {
    const SessionEntry& e = frame.sessions[i];
    if (!(e.attributes & attr::kEncrypt) || !sessions_.count(e.handle)) continue;
    TPMSEC_ASSIGN_OR_RETURN(MutableByteView data, first_tpm2b(response.parameters));
    TPMSEC_RETURN_IF_ERROR(crypt(sessions_.at(e.handle), data, nonces[i], e.nonce, /*encrypt=*/true));
  }
  response.sessions.clear();
  for (size_t i = 0; i < frame.sessions.size(); ++i) {
    const SessionEntry& e = frame.sessions[i];
    auto it = sessions_.find(e.handle);
    if (it == sessions_.end()) {
      response.sessions.push_back(password_response_entry());
      continue;
    }
    FakeSession& s = it->second;
    TPMSEC_ASSIGN_OR_RETURN(Bytes rp_hash, compute_rp_hash(s.auth_hash, rc::kSuccess, frame.code, response.parameters));
    uint8_t attrs = e.attributes;
    SessionEntry out;
    out.nonce = nonces[i];
    out.attributes = attrs;
    TPMSEC_ASSIGN_OR_RETURN(
        out.hmac, crypto::hmac(s.auth_hash, s.key.view(), {rp_hash, out.nonce, e.nonce, ByteView(&attrs, 1)}));
    response.sessions.push_back(std::move(out));
    s.nonce_tpm = nonces[i];
    if (!(attrs & attr::kContinueSession)) sessions_.erase(it);
  }
  ++counters_.responses_forged;
  return answer(std::move(response));
}

}  // namespace tpmsec::testing
