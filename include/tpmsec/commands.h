// The TPM commands tpmsec sends, one definition each (Part 3).
// See command.h for what a definition holds; each kInfo is the command's
// entry in the command table (command_table.h), which has every command.
#ifndef TPMSEC_COMMANDS_H_
#define TPMSEC_COMMANDS_H_

#include "tpmsec/command.h"
#include "tpmsec/command_table.h"
#include "tpmsec/structures.h"

namespace tpmsec::cmd {

// Part 3 §9.3
struct Startup {
  static constexpr const CommandInfo& kInfo = command_info<cc::kStartup>();
  uint16_t startup_type = su::kClear;
  auto handles() const { return std::tie(); }
  auto params() const { return std::tie(startup_type); }
  struct Response {
    auto handles() { return std::tie(); }
    auto params() { return std::tie(); }
  };
};

// Part 3 §9.4
struct Shutdown {
  static constexpr const CommandInfo& kInfo = command_info<cc::kShutdown>();
  uint16_t shutdown_type = su::kClear;
  auto handles() const { return std::tie(); }
  auto params() const { return std::tie(shutdown_type); }
  struct Response {
    auto handles() { return std::tie(); }
    auto params() { return std::tie(); }
  };
};

// Part 3 §30.2
struct GetCapability {
  static constexpr const CommandInfo& kInfo = command_info<cc::kGetCapability>();
  uint32_t capability = 0;
  uint32_t property = 0;
  uint32_t property_count = 0;
  auto handles() const { return std::tie(); }
  auto params() const { return std::tie(capability, property, property_count); }
  struct Response {
    uint8_t more_data = 0;
    CapabilityData capability_data;
    auto handles() { return std::tie(); }
    auto params() { return std::tie(more_data, capability_data); }
  };
};

// Part 3 §16.1
struct GetRandom {
  static constexpr const CommandInfo& kInfo = command_info<cc::kGetRandom>();
  uint16_t bytes_requested = 0;
  auto handles() const { return std::tie(); }
  auto params() const { return std::tie(bytes_requested); }
  struct Response {
    Tpm2bDigest random_bytes;
    auto handles() { return std::tie(); }
    auto params() { return std::tie(random_bytes); }
  };
};

// Part 3 §29.1: TPMS_TIME_INFO, whose TPMS_CLOCK_INFO counts the TPM's
// resets (resetCount: each TPM Reset, a TPM2_Startup(CLEAR) not after a
// TPM2_Shutdown(STATE)) and restarts.
struct ReadClock {
  static constexpr const CommandInfo& kInfo = command_info<cc::kReadClock>();
  auto handles() const { return std::tie(); }
  auto params() const { return std::tie(); }
  struct Response {
    uint64_t time = 0, clock = 0;
    uint32_t reset_count = 0, restart_count = 0;
    uint8_t safe = 0;
    auto handles() { return std::tie(); }
    auto params() { return std::tie(time, clock, reset_count, restart_count, safe); }
  };
};

// Part 3 §22.4
struct PcrRead {
  static constexpr const CommandInfo& kInfo = command_info<cc::kPcrRead>();
  PcrSelectionList pcr_selection_in;
  auto handles() const { return std::tie(); }
  auto params() const { return std::tie(pcr_selection_in); }
  struct Response {
    uint32_t pcr_update_counter = 0;
    PcrSelectionList pcr_selection_out;
    DigestList pcr_values;
    auto handles() { return std::tie(); }
    auto params() { return std::tie(pcr_update_counter, pcr_selection_out, pcr_values); }
  };
};

// Part 3 §22.2
struct PcrExtend {
  static constexpr const CommandInfo& kInfo = command_info<cc::kPcrExtend>();
  NamedHandle pcr_handle;
  DigestValues digests;
  auto handles() const { return std::tie(pcr_handle); }
  auto params() const { return std::tie(digests); }
  struct Response {
    auto handles() { return std::tie(); }
    auto params() { return std::tie(); }
  };
};

// Part 3 §22.8
struct PcrReset {
  static constexpr const CommandInfo& kInfo = command_info<cc::kPcrReset>();
  NamedHandle pcr_handle;
  auto handles() const { return std::tie(pcr_handle); }
  auto params() const { return std::tie(); }
  struct Response {
    auto handles() { return std::tie(); }
    auto params() { return std::tie(); }
  };
};

// Part 3 §24.1
struct CreatePrimary {
  static constexpr const CommandInfo& kInfo = command_info<cc::kCreatePrimary>();
  NamedHandle primary_handle;
  SensitiveCreate in_sensitive;
  PublicArea in_public;
  Tpm2bData outside_info;
  PcrSelectionList creation_pcr;
  auto handles() const { return std::tie(primary_handle); }
  auto params() const { return std::tie(in_sensitive, in_public, outside_info, creation_pcr); }
  CreatedHandle created() const { return {ht::kTransient}; }
  struct Response {
    uint32_t object_handle = 0;
    PublicArea out_public;
    Tpm2bCreationData creation_data;
    Tpm2bDigest creation_hash;
    Ticket creation_ticket;
    Tpm2bName name;
    auto handles() { return std::tie(object_handle); }
    auto params() { return std::tie(out_public, creation_data, creation_hash, creation_ticket, name); }
  };
};

// Part 3 §12.1
struct Create {
  static constexpr const CommandInfo& kInfo = command_info<cc::kCreate>();
  NamedHandle parent_handle;
  SensitiveCreate in_sensitive;
  PublicArea in_public;
  Tpm2bData outside_info;
  PcrSelectionList creation_pcr;
  auto handles() const { return std::tie(parent_handle); }
  auto params() const { return std::tie(in_sensitive, in_public, outside_info, creation_pcr); }
  struct Response {
    Tpm2bPrivate out_private;
    PublicArea out_public;
    Tpm2bCreationData creation_data;
    Tpm2bDigest creation_hash;
    Ticket creation_ticket;
    auto handles() { return std::tie(); }
    auto params() { return std::tie(out_private, out_public, creation_data, creation_hash, creation_ticket); }
  };
};

// Part 3 §12.2
struct Load {
  static constexpr const CommandInfo& kInfo = command_info<cc::kLoad>();
  NamedHandle parent_handle;
  Tpm2bPrivate in_private;
  PublicArea in_public;
  auto handles() const { return std::tie(parent_handle); }
  auto params() const { return std::tie(in_private, in_public); }
  CreatedHandle created() const { return {ht::kTransient}; }
  struct Response {
    uint32_t object_handle = 0;
    Tpm2bName name;
    auto handles() { return std::tie(object_handle); }
    auto params() { return std::tie(name); }
  };
};

// Part 3 §12.7
struct Unseal {
  static constexpr const CommandInfo& kInfo = command_info<cc::kUnseal>();
  NamedHandle item_handle;
  auto handles() const { return std::tie(item_handle); }
  auto params() const { return std::tie(); }
  struct Response {
    Tpm2bSensitiveData out_data;
    auto handles() { return std::tie(); }
    auto params() { return std::tie(out_data); }
  };
};

// Part 3 §28.5. Makes the transient object_handle persistent at
// persistent_handle, or, with object_handle = a persistent handle, evicts it.
struct EvictControl {
  static constexpr const CommandInfo& kInfo = command_info<cc::kEvictControl>();
  NamedHandle auth;
  NamedHandle object_handle;
  uint32_t persistent_handle = 0;
  auto handles() const { return std::tie(auth, object_handle); }
  auto params() const { return std::tie(persistent_handle); }
  struct Response {
    auto handles() { return std::tie(); }
    auto params() { return std::tie(); }
  };
};

// Part 3 §12.4
struct ReadPublic {
  static constexpr const CommandInfo& kInfo = command_info<cc::kReadPublic>();
  NamedHandle object_handle;
  auto handles() const { return std::tie(object_handle); }
  auto params() const { return std::tie(); }
  struct Response {
    PublicArea out_public;
    Tpm2bName name;
    Tpm2bName qualified_name;
    auto handles() { return std::tie(); }
    auto params() { return std::tie(out_public, name, qualified_name); }
  };
};

// Part 3 §31.6. Needs no authorization; the index's size and attributes
// come back unauthenticated here, so the caller bounds what it reads.
struct NvReadPublic {
  static constexpr const CommandInfo& kInfo = command_info<cc::kNvReadPublic>();
  NamedHandle nv_index;
  auto handles() const { return std::tie(nv_index); }
  auto params() const { return std::tie(); }
  struct Response {
    NvPublicArea nv_public;
    Tpm2bName nv_name;
    auto handles() { return std::tie(); }
    auto params() { return std::tie(nv_public, nv_name); }
  };
};

// Part 3 §31.3. `auth` is the first parameter: parameter encryption hides
// it from the bus (tpmsec provision sends its bind secret this way).
struct NvDefineSpace {
  static constexpr const CommandInfo& kInfo = command_info<cc::kNvDefineSpace>();
  NamedHandle auth_handle;
  Tpm2bDigest auth;
  NvPublicArea public_info;
  auto handles() const { return std::tie(auth_handle); }
  auto params() const { return std::tie(auth, public_info); }
  struct Response {
    auto handles() { return std::tie(); }
    auto params() { return std::tie(); }
  };
};

// Part 3 §31.4.
struct NvUndefineSpace {
  static constexpr const CommandInfo& kInfo = command_info<cc::kNvUndefineSpace>();
  NamedHandle auth_handle;
  NamedHandle nv_index;
  auto handles() const { return std::tie(auth_handle, nv_index); }
  auto params() const { return std::tie(); }
  struct Response {
    auto handles() { return std::tie(); }
    auto params() { return std::tie(); }
  };
};

// Part 3 §31.13. auth_handle is the index itself or the hierarchy its
// attributes allow (TPMA_NV_AUTHREAD, TPMA_NV_OWNERREAD).
struct NvRead {
  static constexpr const CommandInfo& kInfo = command_info<cc::kNvRead>();
  NamedHandle auth_handle;
  NamedHandle nv_index;
  uint16_t size = 0;
  uint16_t offset = 0;
  auto handles() const { return std::tie(auth_handle, nv_index); }
  auto params() const { return std::tie(size, offset); }
  struct Response {
    Tpm2bMaxNvBuffer data;
    auto handles() { return std::tie(); }
    auto params() { return std::tie(data); }
  };
};

// Part 3 §28.2
struct ContextSave {
  static constexpr const CommandInfo& kInfo = command_info<cc::kContextSave>();
  NamedHandle save_handle;
  auto handles() const { return std::tie(save_handle); }
  auto params() const { return std::tie(); }
  struct Response {
    Context context;
    auto handles() { return std::tie(); }
    auto params() { return std::tie(context); }
  };
};

// Part 3 §28.3
struct ContextLoad {
  static constexpr const CommandInfo& kInfo = command_info<cc::kContextLoad>();
  Context context;
  auto handles() const { return std::tie(); }
  auto params() const { return std::tie(context); }
  // An object context loads under a new transient handle; a session context
  // under the handle it was saved from.
  CreatedHandle created() const {
    uint8_t type = static_cast<uint8_t>(context.saved_handle >> 24);
    if (type == ht::kHmacSession || type == ht::kPolicySession) return {type, context.saved_handle};
    return {ht::kTransient};
  }
  struct Response {
    uint32_t loaded_handle = 0;
    auto handles() { return std::tie(loaded_handle); }
    auto params() { return std::tie(); }
  };
};

// Part 3 §28.4. The handle to flush is a parameter, not a handle.
struct FlushContext {
  static constexpr const CommandInfo& kInfo = command_info<cc::kFlushContext>();
  uint32_t flush_handle = 0;
  auto handles() const { return std::tie(); }
  auto params() const { return std::tie(flush_handle); }
  struct Response {
    auto handles() { return std::tie(); }
    auto params() { return std::tie(); }
  };
};

// Part 3 §11.1
struct StartAuthSession {
  static constexpr const CommandInfo& kInfo = command_info<cc::kStartAuthSession>();
  NamedHandle tpm_key = NamedHandle::of(rh::kNull);
  NamedHandle bind = NamedHandle::of(rh::kNull);
  Tpm2bDigest nonce_caller;
  Tpm2bEncryptedSecret encrypted_salt;
  uint8_t session_type = se::kHmac;
  SymDef symmetric;
  uint16_t auth_hash = alg::kSha256;
  auto handles() const { return std::tie(tpm_key, bind); }
  auto params() const { return std::tie(nonce_caller, encrypted_salt, session_type, symmetric, auth_hash); }
  CreatedHandle created() const { return {session_type == se::kHmac ? ht::kHmacSession : ht::kPolicySession}; }
  struct Response {
    uint32_t session_handle = 0;
    Tpm2bDigest nonce_tpm;
    auto handles() { return std::tie(session_handle); }
    auto params() { return std::tie(nonce_tpm); }
  };
};

// Part 3 §15.4
struct Hash {
  static constexpr const CommandInfo& kInfo = command_info<cc::kHash>();
  Tpm2bMaxBuffer data;
  uint16_t hash_alg = alg::kSha256;
  uint32_t hierarchy = rh::kNull;
  auto handles() const { return std::tie(); }
  auto params() const { return std::tie(data, hash_alg, hierarchy); }
  struct Response {
    Tpm2bDigest out_hash;
    Ticket validation;
    auto handles() { return std::tie(); }
    auto params() { return std::tie(out_hash, validation); }
  };
};

}  // namespace tpmsec::cmd

#endif  // TPMSEC_COMMANDS_H_
