// The TPM commands tpmsec sends, one definition each (Part 3).
// See command.h for what a definition holds.
#ifndef TPMSEC_COMMANDS_H_
#define TPMSEC_COMMANDS_H_

#include "tpmsec/command.h"
#include "tpmsec/structures.h"

namespace tpmsec::cmd {

// Part 3 §9.3
struct Startup {
  static constexpr CommandInfo kInfo{0x144, "Startup", 0, 0, 0, false, false};
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
  static constexpr CommandInfo kInfo{0x145, "Shutdown", 0, 0, 0, false, false};
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
  static constexpr CommandInfo kInfo{0x17A, "GetCapability", 0, 0, 0, false, false, true};
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
  static constexpr CommandInfo kInfo{0x17B, "GetRandom", 0, 0, 0, false, true, true};
  uint16_t bytes_requested = 0;
  auto handles() const { return std::tie(); }
  auto params() const { return std::tie(bytes_requested); }
  struct Response {
    Tpm2bDigest random_bytes;
    auto handles() { return std::tie(); }
    auto params() { return std::tie(random_bytes); }
  };
};

// Part 3 §22.4
struct PcrRead {
  static constexpr CommandInfo kInfo{0x17E, "PCR_Read", 0, 0, 0, false, false, true};
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
  static constexpr CommandInfo kInfo{0x182, "PCR_Extend", 1, 1, 0, false, false};
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
  static constexpr CommandInfo kInfo{0x13D, "PCR_Reset", 1, 1, 0, false, false};
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
  static constexpr CommandInfo kInfo{0x131, "CreatePrimary", 1, 1, 1, true, true, false, /*creates_handle=*/true};
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
  static constexpr CommandInfo kInfo{0x153, "Create", 1, 1, 0, true, true};
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
  static constexpr CommandInfo kInfo{0x157, "Load", 1, 1, 1, true, true, false, /*creates_handle=*/true};
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
  static constexpr CommandInfo kInfo{0x15E, "Unseal", 1, 1, 0, false, true, true};
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
  static constexpr CommandInfo kInfo{0x120, "EvictControl", 2, 1, 0, false, false};
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
  static constexpr CommandInfo kInfo{0x173, "ReadPublic", 1, 0, 0, false, true, true};
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
  static constexpr CommandInfo kInfo{0x169, "NV_ReadPublic", 1, 0, 0, false, true, true};
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
  static constexpr CommandInfo kInfo{0x12A, "NV_DefineSpace", 1, 1, 0, true, false};
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
  static constexpr CommandInfo kInfo{0x122, "NV_UndefineSpace", 2, 1, 0, false, false};
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
  static constexpr CommandInfo kInfo{0x14E, "NV_Read", 2, 1, 0, false, true, true};
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
  static constexpr CommandInfo kInfo{0x162, "ContextSave", 1, 0, 0, false, false};
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
  static constexpr CommandInfo kInfo{0x161, "ContextLoad", 0, 0, 1, false, false, false, /*creates_handle=*/true};
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
  static constexpr CommandInfo kInfo{0x165, "FlushContext", 0, 0, 0, false, false};
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
  static constexpr CommandInfo kInfo{0x176, "StartAuthSession", 2, 0, 1, true, true, false, /*creates_handle=*/true};
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
  static constexpr CommandInfo kInfo{0x17D, "Hash", 0, 0, 0, true, true, true};
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

// Every command above: the one table tracing, emulation and reports name
// commands by.
inline constexpr CommandInfo kAllCommands[] = {
    Startup::kInfo,
    Shutdown::kInfo,
    GetCapability::kInfo,
    GetRandom::kInfo,
    PcrRead::kInfo,
    PcrExtend::kInfo,
    PcrReset::kInfo,
    CreatePrimary::kInfo,
    Create::kInfo,
    Load::kInfo,
    Unseal::kInfo,
    ReadPublic::kInfo,
    EvictControl::kInfo,
    NvReadPublic::kInfo,
    NvDefineSpace::kInfo,
    NvUndefineSpace::kInfo,
    NvRead::kInfo,
    ContextSave::kInfo,
    ContextLoad::kInfo,
    FlushContext::kInfo,
    StartAuthSession::kInfo,
    Hash::kInfo,
};

// The rest of TPM 2.0's command codes (Part 2 §6.5.2, Table 12, TPM_CC),
// by name only: tpmsec does not send them, but other clients do through
// `tpmsec emulate`, and traces and reports name every command. The codes of
// kAllCommands are not repeated here (commands_test checks it).
struct CommandName {
  uint32_t code;
  std::string_view name;
};
inline constexpr CommandName kOtherCommandNames[] = {
    {0x11F, "NV_UndefineSpaceSpecial"},
    {0x121, "HierarchyControl"},
    {0x124, "ChangeEPS"},
    {0x125, "ChangePPS"},
    {0x126, "Clear"},
    {0x127, "ClearControl"},
    {0x128, "ClockSet"},
    {0x129, "HierarchyChangeAuth"},
    {0x12B, "PCR_Allocate"},
    {0x12C, "PCR_SetAuthPolicy"},
    {0x12D, "PP_Commands"},
    {0x12E, "SetPrimaryPolicy"},
    {0x12F, "FieldUpgradeStart"},
    {0x130, "ClockRateAdjust"},
    {0x132, "NV_GlobalWriteLock"},
    {0x133, "GetCommandAuditDigest"},
    {0x134, "NV_Increment"},
    {0x135, "NV_SetBits"},
    {0x136, "NV_Extend"},
    {0x137, "NV_Write"},
    {0x138, "NV_WriteLock"},
    {0x139, "DictionaryAttackLockReset"},
    {0x13A, "DictionaryAttackParameters"},
    {0x13B, "NV_ChangeAuth"},
    {0x13C, "PCR_Event"},
    {0x13E, "SequenceComplete"},
    {0x13F, "SetAlgorithmSet"},
    {0x140, "SetCommandCodeAuditStatus"},
    {0x141, "FieldUpgradeData"},
    {0x142, "IncrementalSelfTest"},
    {0x143, "SelfTest"},
    {0x146, "StirRandom"},
    {0x147, "ActivateCredential"},
    {0x148, "Certify"},
    {0x149, "PolicyNV"},
    {0x14A, "CertifyCreation"},
    {0x14B, "Duplicate"},
    {0x14C, "GetTime"},
    {0x14D, "GetSessionAuditDigest"},
    {0x14F, "NV_ReadLock"},
    {0x150, "ObjectChangeAuth"},
    {0x151, "PolicySecret"},
    {0x152, "Rewrap"},
    {0x154, "ECDH_ZGen"},
    {0x155, "HMAC"},
    {0x156, "Import"},
    {0x158, "Quote"},
    {0x159, "RSA_Decrypt"},
    {0x15B, "HMAC_Start"},
    {0x15C, "SequenceUpdate"},
    {0x15D, "Sign"},
    {0x160, "PolicySigned"},
    {0x163, "ECDH_KeyGen"},
    {0x164, "EncryptDecrypt"},
    {0x167, "LoadExternal"},
    {0x168, "MakeCredential"},
    {0x16A, "PolicyAuthorize"},
    {0x16B, "PolicyAuthValue"},
    {0x16C, "PolicyCommandCode"},
    {0x16D, "PolicyCounterTimer"},
    {0x16E, "PolicyCpHash"},
    {0x16F, "PolicyLocality"},
    {0x170, "PolicyNameHash"},
    {0x171, "PolicyOR"},
    {0x172, "PolicyTicket"},
    {0x174, "RSA_Encrypt"},
    {0x177, "VerifySignature"},
    {0x178, "ECC_Parameters"},
    {0x179, "FirmwareRead"},
    {0x17C, "GetTestResult"},
    {0x17F, "PolicyPCR"},
    {0x180, "PolicyRestart"},
    {0x181, "ReadClock"},
    {0x183, "PCR_SetAuthValue"},
    {0x184, "NV_Certify"},
    {0x185, "EventSequenceComplete"},
    {0x186, "HashSequenceStart"},
    {0x187, "PolicyPhysicalPresence"},
    {0x188, "PolicyDuplicationSelect"},
    {0x189, "PolicyGetDigest"},
    {0x18A, "TestParms"},
    {0x18B, "Commit"},
    {0x18C, "PolicyPassword"},
    {0x18D, "ZGen_2Phase"},
    {0x18E, "EC_Ephemeral"},
    {0x18F, "PolicyNvWritten"},
    {0x190, "PolicyTemplate"},
    {0x191, "CreateLoaded"},
    {0x192, "PolicyAuthorizeNV"},
    {0x193, "EncryptDecrypt2"},
    {0x194, "AC_GetCapability"},
    {0x195, "AC_Send"},
    {0x196, "Policy_AC_SendSelect"},
    {0x197, "CertifyX509"},
    {0x198, "ACT_SetTimeout"},
    {0x199, "ECC_Encrypt"},
    {0x19A, "ECC_Decrypt"},
    {0x19B, "PolicyCapability"},
    {0x19C, "PolicyParameters"},
    {0x19D, "NV_DefineSpace2"},
    {0x19E, "NV_ReadPublic2"},
    {0x19F, "SetCapability"},
};

}  // namespace tpmsec::cmd

#endif  // TPMSEC_COMMANDS_H_
