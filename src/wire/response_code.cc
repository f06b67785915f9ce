#include "tpmsec/response_code.h"

#include <fmt/format.h>

namespace tpmsec {
namespace {

constexpr uint32_t kFmt1 = 0x080;
constexpr uint32_t kVer1 = 0x100;
constexpr uint32_t kWarn = 0x900;

struct Name {
  uint32_t code;
  const char* name;
};

// Part 2 §6.6.3, Table 16.
// One entry per row, as the spec's table lists them: not reflowed.
// clang-format off
constexpr Name kNames[] = {
    {kVer1 + 0x000, "TPM_RC_INITIALIZE"},      {kVer1 + 0x001, "TPM_RC_FAILURE"},
    {kVer1 + 0x003, "TPM_RC_SEQUENCE"},        {kVer1 + 0x00B, "TPM_RC_PRIVATE"},
    {kVer1 + 0x019, "TPM_RC_HMAC"},            {kVer1 + 0x020, "TPM_RC_DISABLED"},
    {kVer1 + 0x021, "TPM_RC_EXCLUSIVE"},       {kVer1 + 0x024, "TPM_RC_AUTH_TYPE"},
    {kVer1 + 0x025, "TPM_RC_AUTH_MISSING"},    {kVer1 + 0x026, "TPM_RC_POLICY"},
    {kVer1 + 0x027, "TPM_RC_PCR"},             {kVer1 + 0x028, "TPM_RC_PCR_CHANGED"},
    {kVer1 + 0x02D, "TPM_RC_UPGRADE"},         {kVer1 + 0x02E, "TPM_RC_TOO_MANY_CONTEXTS"},
    {kVer1 + 0x02F, "TPM_RC_AUTH_UNAVAILABLE"}, {kVer1 + 0x030, "TPM_RC_REBOOT"},
    {kVer1 + 0x031, "TPM_RC_UNBALANCED"},      {kVer1 + 0x042, "TPM_RC_COMMAND_SIZE"},
    {kVer1 + 0x043, "TPM_RC_COMMAND_CODE"},    {kVer1 + 0x044, "TPM_RC_AUTHSIZE"},
    {kVer1 + 0x045, "TPM_RC_AUTH_CONTEXT"},    {kVer1 + 0x046, "TPM_RC_NV_RANGE"},
    {kVer1 + 0x047, "TPM_RC_NV_SIZE"},         {kVer1 + 0x048, "TPM_RC_NV_LOCKED"},
    {kVer1 + 0x049, "TPM_RC_NV_AUTHORIZATION"}, {kVer1 + 0x04A, "TPM_RC_NV_UNINITIALIZED"},
    {kVer1 + 0x04B, "TPM_RC_NV_SPACE"},        {kVer1 + 0x04C, "TPM_RC_NV_DEFINED"},
    {kVer1 + 0x050, "TPM_RC_BAD_CONTEXT"},     {kVer1 + 0x051, "TPM_RC_CPHASH"},
    {kVer1 + 0x052, "TPM_RC_PARENT"},          {kVer1 + 0x053, "TPM_RC_NEEDS_TEST"},
    {kVer1 + 0x054, "TPM_RC_NO_RESULT"},       {kVer1 + 0x055, "TPM_RC_SENSITIVE"},
    {kFmt1 + 0x001, "TPM_RC_ASYMMETRIC"},      {kFmt1 + 0x002, "TPM_RC_ATTRIBUTES"},
    {kFmt1 + 0x003, "TPM_RC_HASH"},            {kFmt1 + 0x004, "TPM_RC_VALUE"},
    {kFmt1 + 0x005, "TPM_RC_HIERARCHY"},       {kFmt1 + 0x007, "TPM_RC_KEY_SIZE"},
    {kFmt1 + 0x008, "TPM_RC_MGF"},             {kFmt1 + 0x009, "TPM_RC_MODE"},
    {kFmt1 + 0x00A, "TPM_RC_TYPE"},            {kFmt1 + 0x00B, "TPM_RC_HANDLE"},
    {kFmt1 + 0x00C, "TPM_RC_KDF"},             {kFmt1 + 0x00D, "TPM_RC_RANGE"},
    {kFmt1 + 0x00E, "TPM_RC_AUTH_FAIL"},       {kFmt1 + 0x00F, "TPM_RC_NONCE"},
    {kFmt1 + 0x010, "TPM_RC_PP"},              {kFmt1 + 0x012, "TPM_RC_SCHEME"},
    {kFmt1 + 0x015, "TPM_RC_SIZE"},            {kFmt1 + 0x016, "TPM_RC_SYMMETRIC"},
    {kFmt1 + 0x017, "TPM_RC_TAG"},             {kFmt1 + 0x018, "TPM_RC_SELECTOR"},
    {kFmt1 + 0x01A, "TPM_RC_INSUFFICIENT"},    {kFmt1 + 0x01B, "TPM_RC_SIGNATURE"},
    {kFmt1 + 0x01C, "TPM_RC_KEY"},             {kFmt1 + 0x01D, "TPM_RC_POLICY_FAIL"},
    {kFmt1 + 0x01F, "TPM_RC_INTEGRITY"},       {kFmt1 + 0x020, "TPM_RC_TICKET"},
    {kFmt1 + 0x021, "TPM_RC_RESERVED_BITS"},   {kFmt1 + 0x022, "TPM_RC_BAD_AUTH"},
    {kFmt1 + 0x023, "TPM_RC_EXPIRED"},         {kFmt1 + 0x024, "TPM_RC_POLICY_CC"},
    {kFmt1 + 0x025, "TPM_RC_BINDING"},         {kFmt1 + 0x026, "TPM_RC_CURVE"},
    {kFmt1 + 0x027, "TPM_RC_ECC_POINT"},       {kWarn + 0x001, "TPM_RC_CONTEXT_GAP"},
    {kWarn + 0x002, "TPM_RC_OBJECT_MEMORY"},   {kWarn + 0x003, "TPM_RC_SESSION_MEMORY"},
    {kWarn + 0x004, "TPM_RC_MEMORY"},          {kWarn + 0x005, "TPM_RC_SESSION_HANDLES"},
    {kWarn + 0x006, "TPM_RC_OBJECT_HANDLES"},  {kWarn + 0x007, "TPM_RC_LOCALITY"},
    {kWarn + 0x008, "TPM_RC_YIELDED"},         {kWarn + 0x009, "TPM_RC_CANCELED"},
    {kWarn + 0x00A, "TPM_RC_TESTING"},         {kWarn + 0x010, "TPM_RC_REFERENCE_H0"},
    {kWarn + 0x011, "TPM_RC_REFERENCE_H1"},    {kWarn + 0x012, "TPM_RC_REFERENCE_H2"},
    {kWarn + 0x013, "TPM_RC_REFERENCE_H3"},    {kWarn + 0x014, "TPM_RC_REFERENCE_H4"},
    {kWarn + 0x015, "TPM_RC_REFERENCE_H5"},    {kWarn + 0x016, "TPM_RC_REFERENCE_H6"},
    {kWarn + 0x018, "TPM_RC_REFERENCE_S0"},    {kWarn + 0x019, "TPM_RC_REFERENCE_S1"},
    {kWarn + 0x01A, "TPM_RC_REFERENCE_S2"},    {kWarn + 0x01B, "TPM_RC_REFERENCE_S3"},
    {kWarn + 0x01C, "TPM_RC_REFERENCE_S4"},    {kWarn + 0x01D, "TPM_RC_REFERENCE_S5"},
    {kWarn + 0x01E, "TPM_RC_REFERENCE_S6"},    {kWarn + 0x020, "TPM_RC_NV_RATE"},
    {kWarn + 0x021, "TPM_RC_LOCKOUT"},         {kWarn + 0x022, "TPM_RC_RETRY"},
    {kWarn + 0x023, "TPM_RC_NV_UNAVAILABLE"},
};
// clang-format on

const char* lookup(uint32_t base) {
  for (const auto& n : kNames) {
    if (n.code == base) return n.name;
  }
  return nullptr;
}

bool is_format1(uint32_t code) { return (code & 0xFFFF0000u) == 0 && (code & kFmt1) != 0; }

}  // namespace

uint32_t rc_base(uint32_t code) {
  if (code & 0xFFFF0000u) return code;  // not a TPM-layer code
  if (is_format1(code)) return kFmt1 | (code & 0x3F);
  return code;
}

bool rc_is_retryable(uint32_t code) {
  uint32_t base = rc_base(code);
  return base == rc::kRetry || base == rc::kYielded || base == rc::kTesting;
}

std::optional<size_t> rc_failed_session(uint32_t code) {
  constexpr uint32_t kReferenceS0 = kWarn + 0x018, kReferenceS6 = kWarn + 0x01E;
  if (code >= kReferenceS0 && code <= kReferenceS6) return code - kReferenceS0;
  // A parameter-relative code (bit 6) uses bits 8-11 as a parameter number.
  if (!is_format1(code) || (code & 0x040) || !(code & 0x800)) return std::nullopt;
  uint32_t base = rc_base(code);
  if (base != rc::kAuthFail && base != rc::kBadAuth) return std::nullopt;
  uint32_t number = (code >> 8) & 0x7;
  if (number == 0) return std::nullopt;
  return number - 1;
}

bool rc_is_about_handle_or_command(uint32_t code) {
  constexpr uint32_t kReferenceS0 = kWarn + 0x018, kReferenceS6 = kWarn + 0x01E;
  if (code >= kReferenceS0 && code <= kReferenceS6) return false;
  return !is_format1(code) || (code & 0x840) == 0;
}

uint32_t rc_handle_at(size_t index) { return rc::kHandle | static_cast<uint32_t>((index + 1) & 7) << 8; }

uint32_t rc_session_handle_at(size_t index) {
  return rc::kHandle | 0x800u | static_cast<uint32_t>((index + 1) & 7) << 8;
}

uint32_t rc_parameter(uint32_t base, size_t index) {
  return base | 0x040u | static_cast<uint32_t>((index + 1) & 0xF) << 8;
}

uint32_t rc_for_handle(uint32_t code, size_t index) {
  constexpr uint32_t kReferenceH0 = kWarn + 0x010, kReferenceH6 = kWarn + 0x016;
  if (index > 6) return code;
  if (code >= kReferenceH0 && code <= kReferenceH6) return kReferenceH0 + static_cast<uint32_t>(index);
  // Handle-relative: format one, neither the parameter (bit 6) nor the
  // session (bit 11) bit, a number in bits 8-10.
  if (!is_format1(code) || (code & 0x040) || (code & 0x800) || ((code >> 8) & 0x7) == 0) return code;
  return (code & ~0x700u) | (static_cast<uint32_t>(index + 1) << 8);
}

std::string describe_rc(uint32_t code) {
  if (code == 0) return "TPM_RC_SUCCESS";
  uint32_t base = rc_base(code);
  const char* name = lookup(base);
  if (!name) return fmt::format("0x{:08x} (unknown response code)", code);
  if (is_format1(code)) {
    uint32_t n = (code >> 8) & 0xF;
    if (code & 0x40) return fmt::format("{} (parameter {})", name, n);
    if (code & 0x800) return fmt::format("{} (session {})", name, n & 0x7);
    if (n != 0) return fmt::format("{} (handle {})", name, n & 0x7);
    return name;
  }
  if ((code & kWarn) == kWarn) return fmt::format("{} (warning)", name);
  return name;
}

}  // namespace tpmsec
