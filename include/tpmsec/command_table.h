// The command table: every TPM 2.0 command of TPM 2.0 Part 3, once, with the attributes anyone needs to
// frame it (command.h, CommandInfo). The one place a command code is named and described: commands.h
// takes its kInfo from here (command_info<cc::kName>()), code that handles a command specially names it
// as cc::kName (below), tracing names commands by it, and a front end that adds a session to a command it
// does not otherwise know (a TCTI) looks it up with find_command().
// Ownership: static, immutable data; every function is thread-safe. Errors: find_command() of an unknown
// code is nullptr (no entry), never a guess; a misspelt cc:: name does not compile.
// Each field's source (Part 2 §6.5.2, Part 3's handle areas and "Auth Index:", Part 2 §8.9 TPMA_CC,
// tpmsec's own retry_safe judgement) and the cross-check against libtpms (github.com/stefanberger/libtpms,
// src/tpm2/CommandAttributeData.h) and the embedded TPM's TPM_CAP_COMMANDS (tests/wire/command_table_test.cc):
// docs/architecture.md, "The command table (include/tpmsec/command_table.h)".
#ifndef TPMSEC_COMMAND_TABLE_H_
#define TPMSEC_COMMAND_TABLE_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "tpmsec/command.h"

namespace tpmsec {

// In ascending code order (command_table.cc checks it at compile time). Codes
// 0x123, 0x15A, 0x15F, 0x166 and 0x175 are unassigned. 0x19B..0x1A1 are
// later than Library 1.59 (the reference code's rev 180 and after; libtpms
// master has them); vendor commands (TPMA_CC.V) are not Part 3's and are not
// here.
// One entry per row, as the spec's table lists them: not reflowed.
// clang-format off
inline constexpr CommandInfo kCommandTable[] = {
    {.code = 0x11F, .name = "NV_UndefineSpaceSpecial", .handle_count = 2, .auth_count = 2, .writes_nv = true},
    {.code = 0x120, .name = "EvictControl", .handle_count = 2, .auth_count = 1, .writes_nv = true},
    {.code = 0x121, .name = "HierarchyControl", .handle_count = 1, .auth_count = 1, .writes_nv = true,
     .extensive = true},
    {.code = 0x122, .name = "NV_UndefineSpace", .handle_count = 2, .auth_count = 1, .writes_nv = true},
    {.code = 0x124, .name = "ChangeEPS", .handle_count = 1, .auth_count = 1, .writes_nv = true, .extensive = true},
    {.code = 0x125, .name = "ChangePPS", .handle_count = 1, .auth_count = 1, .writes_nv = true, .extensive = true},
    {.code = 0x126, .name = "Clear", .handle_count = 1, .auth_count = 1, .writes_nv = true, .extensive = true},
    {.code = 0x127, .name = "ClearControl", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x128, .name = "ClockSet", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x129, .name = "HierarchyChangeAuth", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x12A, .name = "NV_DefineSpace", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x12B, .name = "PCR_Allocate", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x12C, .name = "PCR_SetAuthPolicy", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x12D, .name = "PP_Commands", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x12E, .name = "SetPrimaryPolicy", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x12F, .name = "FieldUpgradeStart", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true},
    {.code = 0x130, .name = "ClockRateAdjust", .handle_count = 1, .auth_count = 1},
    {.code = 0x131, .name = "CreatePrimary", .handle_count = 1, .auth_count = 1, .response_handle_count = 1,
     .command_param_tpm2b = true, .response_param_tpm2b = true, .creates_handle = true},
    {.code = 0x132, .name = "NV_GlobalWriteLock", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x133, .name = "GetCommandAuditDigest", .handle_count = 2, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .writes_nv = true},
    {.code = 0x134, .name = "NV_Increment", .handle_count = 2, .auth_count = 1, .writes_nv = true},
    {.code = 0x135, .name = "NV_SetBits", .handle_count = 2, .auth_count = 1, .writes_nv = true},
    {.code = 0x136, .name = "NV_Extend", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x137, .name = "NV_Write", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x138, .name = "NV_WriteLock", .handle_count = 2, .auth_count = 1, .writes_nv = true},
    {.code = 0x139, .name = "DictionaryAttackLockReset", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x13A, .name = "DictionaryAttackParameters", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x13B, .name = "NV_ChangeAuth", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x13C, .name = "PCR_Event", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x13D, .name = "PCR_Reset", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x13E, .name = "SequenceComplete", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .flushes_handles = true},
    {.code = 0x13F, .name = "SetAlgorithmSet", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x140, .name = "SetCommandCodeAuditStatus", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x141, .name = "FieldUpgradeData", .command_param_tpm2b = true, .writes_nv = true},
    {.code = 0x142, .name = "IncrementalSelfTest", .writes_nv = true},
    {.code = 0x143, .name = "SelfTest", .writes_nv = true},
    {.code = 0x144, .name = "Startup", .no_sessions = true, .writes_nv = true},
    {.code = 0x145, .name = "Shutdown", .writes_nv = true},
    {.code = 0x146, .name = "StirRandom", .command_param_tpm2b = true, .writes_nv = true},
    {.code = 0x147, .name = "ActivateCredential", .handle_count = 2, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x148, .name = "Certify", .handle_count = 2, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x149, .name = "PolicyNV", .handle_count = 3, .auth_count = 1, .command_param_tpm2b = true},
    {.code = 0x14A, .name = "CertifyCreation", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x14B, .name = "Duplicate", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x14C, .name = "GetTime", .handle_count = 2, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x14D, .name = "GetSessionAuditDigest", .handle_count = 3, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x14E, .name = "NV_Read", .handle_count = 2, .auth_count = 1, .response_param_tpm2b = true,
     .retry_safe = true},
    {.code = 0x14F, .name = "NV_ReadLock", .handle_count = 2, .auth_count = 1, .writes_nv = true},
    {.code = 0x150, .name = "ObjectChangeAuth", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x151, .name = "PolicySecret", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x152, .name = "Rewrap", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x153, .name = "Create", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x154, .name = "ECDH_ZGen", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x155, .name = "HMAC", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x156, .name = "Import", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x157, .name = "Load", .handle_count = 1, .auth_count = 1, .response_handle_count = 1,
     .command_param_tpm2b = true, .response_param_tpm2b = true, .creates_handle = true},
    {.code = 0x158, .name = "Quote", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x159, .name = "RSA_Decrypt", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x15B, .name = "HMAC_Start", .handle_count = 1, .auth_count = 1, .response_handle_count = 1,
     .command_param_tpm2b = true, .creates_handle = true},
    {.code = 0x15C, .name = "SequenceUpdate", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true},
    {.code = 0x15D, .name = "Sign", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true},
    {.code = 0x15E, .name = "Unseal", .handle_count = 1, .auth_count = 1, .response_param_tpm2b = true,
     .retry_safe = true},
    {.code = 0x160, .name = "PolicySigned", .handle_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x161, .name = "ContextLoad", .response_handle_count = 1, .no_sessions = true, .creates_handle = true},
    {.code = 0x162, .name = "ContextSave", .handle_count = 1, .no_sessions = true},
    {.code = 0x163, .name = "ECDH_KeyGen", .handle_count = 1, .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x164, .name = "EncryptDecrypt", .handle_count = 1, .auth_count = 1, .response_param_tpm2b = true,
     .retry_safe = true},
    {.code = 0x165, .name = "FlushContext", .no_sessions = true},
    {.code = 0x167, .name = "LoadExternal", .response_handle_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .creates_handle = true},
    {.code = 0x168, .name = "MakeCredential", .handle_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x169, .name = "NV_ReadPublic", .handle_count = 1, .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x16A, .name = "PolicyAuthorize", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x16B, .name = "PolicyAuthValue", .handle_count = 1},
    {.code = 0x16C, .name = "PolicyCommandCode", .handle_count = 1},
    {.code = 0x16D, .name = "PolicyCounterTimer", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x16E, .name = "PolicyCpHash", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x16F, .name = "PolicyLocality", .handle_count = 1},
    {.code = 0x170, .name = "PolicyNameHash", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x171, .name = "PolicyOR", .handle_count = 1},
    {.code = 0x172, .name = "PolicyTicket", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x173, .name = "ReadPublic", .handle_count = 1, .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x174, .name = "RSA_Encrypt", .handle_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x176, .name = "StartAuthSession", .handle_count = 2, .response_handle_count = 1,
     .command_param_tpm2b = true, .response_param_tpm2b = true, .creates_handle = true},
    {.code = 0x177, .name = "VerifySignature", .handle_count = 1, .command_param_tpm2b = true, .retry_safe = true},
    {.code = 0x178, .name = "ECC_Parameters", .retry_safe = true},
    {.code = 0x179, .name = "FirmwareRead", .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x17A, .name = "GetCapability", .retry_safe = true},
    {.code = 0x17B, .name = "GetRandom", .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x17C, .name = "GetTestResult", .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x17D, .name = "Hash", .command_param_tpm2b = true, .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x17E, .name = "PCR_Read", .retry_safe = true},
    {.code = 0x17F, .name = "PolicyPCR", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x180, .name = "PolicyRestart", .handle_count = 1},
    {.code = 0x181, .name = "ReadClock", .retry_safe = true},
    {.code = 0x182, .name = "PCR_Extend", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x183, .name = "PCR_SetAuthValue", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true},
    {.code = 0x184, .name = "NV_Certify", .handle_count = 3, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x185, .name = "EventSequenceComplete", .handle_count = 2, .auth_count = 2, .command_param_tpm2b = true,
     .writes_nv = true, .flushes_handles = true},
    {.code = 0x186, .name = "HashSequenceStart", .response_handle_count = 1, .command_param_tpm2b = true,
     .creates_handle = true},
    {.code = 0x187, .name = "PolicyPhysicalPresence", .handle_count = 1},
    {.code = 0x188, .name = "PolicyDuplicationSelect", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x189, .name = "PolicyGetDigest", .handle_count = 1, .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x18A, .name = "TestParms", .retry_safe = true},
    {.code = 0x18B, .name = "Commit", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x18C, .name = "PolicyPassword", .handle_count = 1},
    {.code = 0x18D, .name = "ZGen_2Phase", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x18E, .name = "EC_Ephemeral", .response_param_tpm2b = true},
    {.code = 0x18F, .name = "PolicyNvWritten", .handle_count = 1},
    {.code = 0x190, .name = "PolicyTemplate", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x191, .name = "CreateLoaded", .handle_count = 1, .auth_count = 1, .response_handle_count = 1,
     .command_param_tpm2b = true, .response_param_tpm2b = true, .creates_handle = true},
    {.code = 0x192, .name = "PolicyAuthorizeNV", .handle_count = 3, .auth_count = 1},
    {.code = 0x193, .name = "EncryptDecrypt2", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x194, .name = "AC_GetCapability", .handle_count = 1, .retry_safe = true},
    {.code = 0x195, .name = "AC_Send", .handle_count = 3, .auth_count = 2, .command_param_tpm2b = true},
    {.code = 0x196, .name = "Policy_AC_SendSelect", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x197, .name = "CertifyX509", .handle_count = 2, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x198, .name = "ACT_SetTimeout", .handle_count = 1, .auth_count = 1},
    {.code = 0x199, .name = "ECC_Encrypt", .handle_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x19A, .name = "ECC_Decrypt", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x19B, .name = "PolicyCapability", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x19C, .name = "PolicyParameters", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x19D, .name = "NV_DefineSpace2", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x19E, .name = "NV_ReadPublic2", .handle_count = 1, .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x19F, .name = "SetCapability", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x1A0, .name = "ReadOnlyControl", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x1A1, .name = "PolicyTransportSPDM", .handle_count = 1, .command_param_tpm2b = true},
};
// clang-format on

// Every command, in ascending code order.
std::span<const CommandInfo> all_commands();

// The command of this code, or nullptr (an unassigned or a vendor code).
// A code from a TPM's command is untrusted input: a caller that frames
// commands it does not know refuses a nullptr rather than guessing.
const CommandInfo* find_command(uint32_t code);

namespace detail {
constexpr const CommandInfo* find_in_table(uint32_t code) {
  for (const CommandInfo& c : kCommandTable) {
    if (c.code == code) return &c;
  }
  return nullptr;
}
}  // namespace detail

// A command's code by its Part 3 name ("FlushContext"), at compile time: code
// that handles a command specially names it, and a name that is not in the
// table does not compile (the throw is never reached at run time).
consteval uint32_t command_code(std::string_view name) {
  for (const CommandInfo& c : kCommandTable) {
    if (c.name == name) return c.code;
  }
  throw "not a TPM 2.0 command name (command_table.h)";
}

// Every command's code by name, the one spelling code uses for a command
// code (cc::kStartAuthSession): each is looked up in kCommandTable by its
// Part 3 name at compile time, so a code and its name cannot disagree and a
// misspelt name does not compile. Part 3's "NV_ReadPublic" is kNvReadPublic:
// an all-capitals word is capitalized, the underscores dropped.
namespace cc {
inline constexpr uint32_t kNvUndefineSpaceSpecial = command_code("NV_UndefineSpaceSpecial");
inline constexpr uint32_t kEvictControl = command_code("EvictControl");
inline constexpr uint32_t kHierarchyControl = command_code("HierarchyControl");
inline constexpr uint32_t kNvUndefineSpace = command_code("NV_UndefineSpace");
inline constexpr uint32_t kChangeEPS = command_code("ChangeEPS");
inline constexpr uint32_t kChangePPS = command_code("ChangePPS");
inline constexpr uint32_t kClear = command_code("Clear");
inline constexpr uint32_t kClearControl = command_code("ClearControl");
inline constexpr uint32_t kClockSet = command_code("ClockSet");
inline constexpr uint32_t kHierarchyChangeAuth = command_code("HierarchyChangeAuth");
inline constexpr uint32_t kNvDefineSpace = command_code("NV_DefineSpace");
inline constexpr uint32_t kPcrAllocate = command_code("PCR_Allocate");
inline constexpr uint32_t kPcrSetAuthPolicy = command_code("PCR_SetAuthPolicy");
inline constexpr uint32_t kPpCommands = command_code("PP_Commands");
inline constexpr uint32_t kSetPrimaryPolicy = command_code("SetPrimaryPolicy");
inline constexpr uint32_t kFieldUpgradeStart = command_code("FieldUpgradeStart");
inline constexpr uint32_t kClockRateAdjust = command_code("ClockRateAdjust");
inline constexpr uint32_t kCreatePrimary = command_code("CreatePrimary");
inline constexpr uint32_t kNvGlobalWriteLock = command_code("NV_GlobalWriteLock");
inline constexpr uint32_t kGetCommandAuditDigest = command_code("GetCommandAuditDigest");
inline constexpr uint32_t kNvIncrement = command_code("NV_Increment");
inline constexpr uint32_t kNvSetBits = command_code("NV_SetBits");
inline constexpr uint32_t kNvExtend = command_code("NV_Extend");
inline constexpr uint32_t kNvWrite = command_code("NV_Write");
inline constexpr uint32_t kNvWriteLock = command_code("NV_WriteLock");
inline constexpr uint32_t kDictionaryAttackLockReset = command_code("DictionaryAttackLockReset");
inline constexpr uint32_t kDictionaryAttackParameters = command_code("DictionaryAttackParameters");
inline constexpr uint32_t kNvChangeAuth = command_code("NV_ChangeAuth");
inline constexpr uint32_t kPcrEvent = command_code("PCR_Event");
inline constexpr uint32_t kPcrReset = command_code("PCR_Reset");
inline constexpr uint32_t kSequenceComplete = command_code("SequenceComplete");
inline constexpr uint32_t kSetAlgorithmSet = command_code("SetAlgorithmSet");
inline constexpr uint32_t kSetCommandCodeAuditStatus = command_code("SetCommandCodeAuditStatus");
inline constexpr uint32_t kFieldUpgradeData = command_code("FieldUpgradeData");
inline constexpr uint32_t kIncrementalSelfTest = command_code("IncrementalSelfTest");
inline constexpr uint32_t kSelfTest = command_code("SelfTest");
inline constexpr uint32_t kStartup = command_code("Startup");
inline constexpr uint32_t kShutdown = command_code("Shutdown");
inline constexpr uint32_t kStirRandom = command_code("StirRandom");
inline constexpr uint32_t kActivateCredential = command_code("ActivateCredential");
inline constexpr uint32_t kCertify = command_code("Certify");
inline constexpr uint32_t kPolicyNV = command_code("PolicyNV");
inline constexpr uint32_t kCertifyCreation = command_code("CertifyCreation");
inline constexpr uint32_t kDuplicate = command_code("Duplicate");
inline constexpr uint32_t kGetTime = command_code("GetTime");
inline constexpr uint32_t kGetSessionAuditDigest = command_code("GetSessionAuditDigest");
inline constexpr uint32_t kNvRead = command_code("NV_Read");
inline constexpr uint32_t kNvReadLock = command_code("NV_ReadLock");
inline constexpr uint32_t kObjectChangeAuth = command_code("ObjectChangeAuth");
inline constexpr uint32_t kPolicySecret = command_code("PolicySecret");
inline constexpr uint32_t kRewrap = command_code("Rewrap");
inline constexpr uint32_t kCreate = command_code("Create");
inline constexpr uint32_t kEcdhZGen = command_code("ECDH_ZGen");
inline constexpr uint32_t kHmac = command_code("HMAC");
inline constexpr uint32_t kImport = command_code("Import");
inline constexpr uint32_t kLoad = command_code("Load");
inline constexpr uint32_t kQuote = command_code("Quote");
inline constexpr uint32_t kRsaDecrypt = command_code("RSA_Decrypt");
inline constexpr uint32_t kHmacStart = command_code("HMAC_Start");
inline constexpr uint32_t kSequenceUpdate = command_code("SequenceUpdate");
inline constexpr uint32_t kSign = command_code("Sign");
inline constexpr uint32_t kUnseal = command_code("Unseal");
inline constexpr uint32_t kPolicySigned = command_code("PolicySigned");
inline constexpr uint32_t kContextLoad = command_code("ContextLoad");
inline constexpr uint32_t kContextSave = command_code("ContextSave");
inline constexpr uint32_t kEcdhKeyGen = command_code("ECDH_KeyGen");
inline constexpr uint32_t kEncryptDecrypt = command_code("EncryptDecrypt");
inline constexpr uint32_t kFlushContext = command_code("FlushContext");
inline constexpr uint32_t kLoadExternal = command_code("LoadExternal");
inline constexpr uint32_t kMakeCredential = command_code("MakeCredential");
inline constexpr uint32_t kNvReadPublic = command_code("NV_ReadPublic");
inline constexpr uint32_t kPolicyAuthorize = command_code("PolicyAuthorize");
inline constexpr uint32_t kPolicyAuthValue = command_code("PolicyAuthValue");
inline constexpr uint32_t kPolicyCommandCode = command_code("PolicyCommandCode");
inline constexpr uint32_t kPolicyCounterTimer = command_code("PolicyCounterTimer");
inline constexpr uint32_t kPolicyCpHash = command_code("PolicyCpHash");
inline constexpr uint32_t kPolicyLocality = command_code("PolicyLocality");
inline constexpr uint32_t kPolicyNameHash = command_code("PolicyNameHash");
inline constexpr uint32_t kPolicyOR = command_code("PolicyOR");
inline constexpr uint32_t kPolicyTicket = command_code("PolicyTicket");
inline constexpr uint32_t kReadPublic = command_code("ReadPublic");
inline constexpr uint32_t kRsaEncrypt = command_code("RSA_Encrypt");
inline constexpr uint32_t kStartAuthSession = command_code("StartAuthSession");
inline constexpr uint32_t kVerifySignature = command_code("VerifySignature");
inline constexpr uint32_t kEccParameters = command_code("ECC_Parameters");
inline constexpr uint32_t kFirmwareRead = command_code("FirmwareRead");
inline constexpr uint32_t kGetCapability = command_code("GetCapability");
inline constexpr uint32_t kGetRandom = command_code("GetRandom");
inline constexpr uint32_t kGetTestResult = command_code("GetTestResult");
inline constexpr uint32_t kHash = command_code("Hash");
inline constexpr uint32_t kPcrRead = command_code("PCR_Read");
inline constexpr uint32_t kPolicyPCR = command_code("PolicyPCR");
inline constexpr uint32_t kPolicyRestart = command_code("PolicyRestart");
inline constexpr uint32_t kReadClock = command_code("ReadClock");
inline constexpr uint32_t kPcrExtend = command_code("PCR_Extend");
inline constexpr uint32_t kPcrSetAuthValue = command_code("PCR_SetAuthValue");
inline constexpr uint32_t kNvCertify = command_code("NV_Certify");
inline constexpr uint32_t kEventSequenceComplete = command_code("EventSequenceComplete");
inline constexpr uint32_t kHashSequenceStart = command_code("HashSequenceStart");
inline constexpr uint32_t kPolicyPhysicalPresence = command_code("PolicyPhysicalPresence");
inline constexpr uint32_t kPolicyDuplicationSelect = command_code("PolicyDuplicationSelect");
inline constexpr uint32_t kPolicyGetDigest = command_code("PolicyGetDigest");
inline constexpr uint32_t kTestParms = command_code("TestParms");
inline constexpr uint32_t kCommit = command_code("Commit");
inline constexpr uint32_t kPolicyPassword = command_code("PolicyPassword");
inline constexpr uint32_t kZGen2Phase = command_code("ZGen_2Phase");
inline constexpr uint32_t kEcEphemeral = command_code("EC_Ephemeral");
inline constexpr uint32_t kPolicyNvWritten = command_code("PolicyNvWritten");
inline constexpr uint32_t kPolicyTemplate = command_code("PolicyTemplate");
inline constexpr uint32_t kCreateLoaded = command_code("CreateLoaded");
inline constexpr uint32_t kPolicyAuthorizeNV = command_code("PolicyAuthorizeNV");
inline constexpr uint32_t kEncryptDecrypt2 = command_code("EncryptDecrypt2");
inline constexpr uint32_t kAcGetCapability = command_code("AC_GetCapability");
inline constexpr uint32_t kAcSend = command_code("AC_Send");
inline constexpr uint32_t kPolicyAcSendSelect = command_code("Policy_AC_SendSelect");
inline constexpr uint32_t kCertifyX509 = command_code("CertifyX509");
inline constexpr uint32_t kActSetTimeout = command_code("ACT_SetTimeout");
inline constexpr uint32_t kEccEncrypt = command_code("ECC_Encrypt");
inline constexpr uint32_t kEccDecrypt = command_code("ECC_Decrypt");
inline constexpr uint32_t kPolicyCapability = command_code("PolicyCapability");
inline constexpr uint32_t kPolicyParameters = command_code("PolicyParameters");
inline constexpr uint32_t kNvDefineSpace2 = command_code("NV_DefineSpace2");
inline constexpr uint32_t kNvReadPublic2 = command_code("NV_ReadPublic2");
inline constexpr uint32_t kSetCapability = command_code("SetCapability");
inline constexpr uint32_t kReadOnlyControl = command_code("ReadOnlyControl");
inline constexpr uint32_t kPolicyTransportSPDM = command_code("PolicyTransportSPDM");
}  // namespace cc

// A command's entry at compile time: what a typed definition's kInfo is.
// A code that is not in the table does not compile.
template <uint32_t Code>
constexpr const CommandInfo& command_info() {
  constexpr const CommandInfo* info = detail::find_in_table(Code);
  static_assert(info != nullptr, "not a TPM 2.0 command code (command_table.h)");
  return *info;
}

}  // namespace tpmsec

#endif  // TPMSEC_COMMAND_TABLE_H_
