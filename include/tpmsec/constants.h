// TPM 2.0 constants used by tpmsec (TPM 2.0 Library Part 2, §6).
#ifndef TPMSEC_CONSTANTS_H_
#define TPMSEC_CONSTANTS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tpmsec {

// TPM_ST (Part 2 §6.9)
namespace st {
inline constexpr uint16_t kNoSessions = 0x8001;
inline constexpr uint16_t kSessions = 0x8002;
inline constexpr uint16_t kCreation = 0x8021;
inline constexpr uint16_t kHashcheck = 0x8024;
}  // namespace st

// TPM_SU (Part 2 §6.5)
namespace su {
inline constexpr uint16_t kClear = 0x0000;
inline constexpr uint16_t kState = 0x0001;
}  // namespace su

// TPM_SE (Part 2 §6.11)
namespace se {
inline constexpr uint8_t kHmac = 0x00;
inline constexpr uint8_t kPolicy = 0x01;
inline constexpr uint8_t kTrial = 0x03;
}  // namespace se

// TPM_ALG_ID (Part 2 §6.3; TCG Algorithm Registry)
namespace alg {
inline constexpr uint16_t kError = 0x0000;
inline constexpr uint16_t kRsa = 0x0001;
inline constexpr uint16_t kSha1 = 0x0004;
inline constexpr uint16_t kHmac = 0x0005;
inline constexpr uint16_t kAes = 0x0006;
inline constexpr uint16_t kKeyedHash = 0x0008;
inline constexpr uint16_t kXor = 0x000A;
inline constexpr uint16_t kSha256 = 0x000B;
inline constexpr uint16_t kSha384 = 0x000C;
inline constexpr uint16_t kSha512 = 0x000D;
inline constexpr uint16_t kNull = 0x0010;
inline constexpr uint16_t kSm3_256 = 0x0012;
inline constexpr uint16_t kRsassa = 0x0014;
inline constexpr uint16_t kRsaes = 0x0015;
inline constexpr uint16_t kRsapss = 0x0016;
inline constexpr uint16_t kOaep = 0x0017;
inline constexpr uint16_t kEcdsa = 0x0018;
inline constexpr uint16_t kEcdh = 0x0019;
inline constexpr uint16_t kEcc = 0x0023;
inline constexpr uint16_t kSymCipher = 0x0025;
inline constexpr uint16_t kCtr = 0x0040;
inline constexpr uint16_t kOfb = 0x0041;
inline constexpr uint16_t kCbc = 0x0042;
inline constexpr uint16_t kCfb = 0x0043;
inline constexpr uint16_t kEcb = 0x0044;
}  // namespace alg

// TPM_ECC_CURVE (Part 2 §6.4)
namespace curve {
inline constexpr uint16_t kNistP256 = 0x0003;
inline constexpr uint16_t kNistP384 = 0x0004;
}  // namespace curve

// TPM_RH / TPM_RS (Part 2 §7.4)
namespace rh {
inline constexpr uint32_t kOwner = 0x40000001;
inline constexpr uint32_t kNull = 0x40000007;
inline constexpr uint32_t kPasswordSession = 0x40000009;  // TPM_RS_PW
inline constexpr uint32_t kLockout = 0x4000000A;
inline constexpr uint32_t kEndorsement = 0x4000000B;
inline constexpr uint32_t kPlatform = 0x4000000C;
}  // namespace rh

// Handle types: the top byte of a handle (Part 2 §7.2).
namespace ht {
inline constexpr uint8_t kPcr = 0x00;
inline constexpr uint8_t kNvIndex = 0x01;
inline constexpr uint8_t kHmacSession = 0x02;
inline constexpr uint8_t kPolicySession = 0x03;
inline constexpr uint8_t kPermanent = 0x40;
inline constexpr uint8_t kTransient = 0x80;
inline constexpr uint8_t kPersistent = 0x81;
inline constexpr uint32_t kFirstTransient = 0x80000000;
inline constexpr uint32_t kFirstHmacSession = 0x02000000;
inline constexpr uint32_t kFirstPolicySession = 0x03000000;
inline constexpr uint32_t kFirstLoadedSession = 0x02000000;
// TPM_HT_SAVED_SESSION (0x03) in a TPM_CAP_HANDLES listing: the context-saved sessions.
inline constexpr uint32_t kFirstSavedSession = 0x03000000;
// An HMAC or policy session's handle (loaded, or saved: listed as either type).
constexpr bool is_session(uint32_t handle) {
  uint8_t type = static_cast<uint8_t>(handle >> 24);
  return type == kHmacSession || type == kPolicySession;
}
}  // namespace ht

// TPM_CAP (Part 2 §6.12)
namespace cap {
inline constexpr uint32_t kAlgs = 0x00000000;
inline constexpr uint32_t kHandles = 0x00000001;
inline constexpr uint32_t kCommands = 0x00000002;
inline constexpr uint32_t kPcrs = 0x00000005;
inline constexpr uint32_t kTpmProperties = 0x00000006;
inline constexpr uint32_t kEccCurves = 0x00000008;
}  // namespace cap

// TPM_PT (Part 2 §6.13)
namespace pt {
inline constexpr uint32_t kFixed = 0x100;
inline constexpr uint32_t kFamilyIndicator = kFixed + 0;
inline constexpr uint32_t kLevel = kFixed + 1;
inline constexpr uint32_t kRevision = kFixed + 2;
inline constexpr uint32_t kDayOfYear = kFixed + 3;
inline constexpr uint32_t kYear = kFixed + 4;
inline constexpr uint32_t kManufacturer = kFixed + 5;
inline constexpr uint32_t kVendorString1 = kFixed + 6;
inline constexpr uint32_t kVendorString4 = kFixed + 9;
inline constexpr uint32_t kVendorTpmType = kFixed + 10;
inline constexpr uint32_t kFirmwareVersion1 = kFixed + 11;
inline constexpr uint32_t kFirmwareVersion2 = kFixed + 12;
inline constexpr uint32_t kInputBuffer = kFixed + 13;
inline constexpr uint32_t kHrTransientMin = kFixed + 14;
inline constexpr uint32_t kHrPersistentMin = kFixed + 15;
inline constexpr uint32_t kHrLoadedMin = kFixed + 16;
inline constexpr uint32_t kActiveSessionsMax = kFixed + 17;
inline constexpr uint32_t kPcrCount = kFixed + 18;
inline constexpr uint32_t kPcrSelectMin = kFixed + 19;
inline constexpr uint32_t kContextGapMax = kFixed + 20;
inline constexpr uint32_t kNvCountersMax = kFixed + 22;
inline constexpr uint32_t kNvIndexMax = kFixed + 23;
inline constexpr uint32_t kMemory = kFixed + 24;
inline constexpr uint32_t kClockUpdate = kFixed + 25;
inline constexpr uint32_t kContextHash = kFixed + 26;
inline constexpr uint32_t kContextSym = kFixed + 27;
inline constexpr uint32_t kContextSymSize = kFixed + 28;
inline constexpr uint32_t kOrderlyCount = kFixed + 29;
inline constexpr uint32_t kMaxCommandSize = kFixed + 30;
inline constexpr uint32_t kMaxResponseSize = kFixed + 31;
inline constexpr uint32_t kMaxDigest = kFixed + 32;
inline constexpr uint32_t kMaxObjectContext = kFixed + 33;
inline constexpr uint32_t kMaxSessionContext = kFixed + 34;
inline constexpr uint32_t kPsFamilyIndicator = kFixed + 35;
inline constexpr uint32_t kTotalCommands = kFixed + 41;
inline constexpr uint32_t kNvBufferMax = kFixed + 44;
inline constexpr uint32_t kVar = 0x200;
inline constexpr uint32_t kHrTransientAvail = kVar + 7;
inline constexpr uint32_t kHrLoaded = kVar + 3;
inline constexpr uint32_t kHrLoadedAvail = kVar + 4;
inline constexpr uint32_t kHrActive = kVar + 5;
inline constexpr uint32_t kHrActiveAvail = kVar + 6;
}  // namespace pt

// The largest command tpmsec sends, header included: 4096 bytes, the Linux
// TPM driver's TPM_BUFSIZE (drivers/char/tpm/tpm.h; /dev/tpm* refuses a longer
// write) and the command buffer of the reference TPM and libtpms. A TPM states
// its own limit as TPM_PT_MAX_COMMAND_SIZE (pt::kMaxCommandSize above).
inline constexpr size_t kMaxCommandBytes = 4096;

// Session attributes (TPMA_SESSION, Part 2 §8.4).
namespace attr {
inline constexpr uint8_t kContinueSession = 0x01;
inline constexpr uint8_t kAuditExclusive = 0x02;
inline constexpr uint8_t kAuditReset = 0x04;
inline constexpr uint8_t kDecrypt = 0x20;
inline constexpr uint8_t kEncrypt = 0x40;
inline constexpr uint8_t kAudit = 0x80;
}  // namespace attr

// Digest size of a hash algorithm, or nullopt for an id tpmsec does not know.
// Used to bound every TPM-supplied digest (TPMT_HA, PCR banks).
std::optional<uint16_t> digest_size(uint16_t hash_alg);

// "sha256" for alg::kSha256 etc.; "0x00XX" for unknown ids.
std::string_view hash_name(uint16_t hash_alg);

// Parses "sha1", "sha256", "sha384", "sha512" (case-insensitive).
std::optional<uint16_t> hash_from_name(std::string_view name);

}  // namespace tpmsec

#endif  // TPMSEC_CONSTANTS_H_
