// Response-code decoding (Part 2 §6.6).
#include <gtest/gtest.h>

#include <string>

#include "tpmsec/response_code.h"
#include "tpmsec/tpm.h"

namespace tpmsec {
namespace {

TEST(DescribeRc, Success) { EXPECT_EQ(describe_rc(0), "TPM_RC_SUCCESS"); }

TEST(DescribeRc, SessionNumbered) {
  EXPECT_EQ(describe_rc(0x9A2), "TPM_RC_BAD_AUTH (session 1)");
  EXPECT_EQ(describe_rc(0xAA2), "TPM_RC_BAD_AUTH (session 2)");
  EXPECT_EQ(describe_rc(0xFA2), "TPM_RC_BAD_AUTH (session 7)");
  EXPECT_EQ(describe_rc(0x98E), "TPM_RC_AUTH_FAIL (session 1)");
}

TEST(DescribeRc, Warnings) {
  EXPECT_EQ(describe_rc(0x922), "TPM_RC_RETRY (warning)");
  EXPECT_EQ(describe_rc(0x908), "TPM_RC_YIELDED (warning)");
  EXPECT_EQ(describe_rc(0x90A), "TPM_RC_TESTING (warning)");
  EXPECT_EQ(describe_rc(0x902), "TPM_RC_OBJECT_MEMORY (warning)");
  EXPECT_EQ(describe_rc(0x903), "TPM_RC_SESSION_MEMORY (warning)");
  EXPECT_EQ(describe_rc(0x921), "TPM_RC_LOCKOUT (warning)");
  EXPECT_EQ(describe_rc(0x910), "TPM_RC_REFERENCE_H0 (warning)");
}

TEST(DescribeRc, ParameterNumbered) {
  EXPECT_EQ(describe_rc(0x1C4), "TPM_RC_VALUE (parameter 1)");
  EXPECT_EQ(describe_rc(0x2C4), "TPM_RC_VALUE (parameter 2)");
  EXPECT_EQ(describe_rc(0xFD5), "TPM_RC_SIZE (parameter 15)");  // parameter numbers use all four bits
  EXPECT_EQ(describe_rc(0x1D5), "TPM_RC_SIZE (parameter 1)");
  EXPECT_EQ(describe_rc(0x2C3), "TPM_RC_HASH (parameter 2)");
}

TEST(DescribeRc, HandleNumbered) {
  EXPECT_EQ(describe_rc(0x18B), "TPM_RC_HANDLE (handle 1)");
  EXPECT_EQ(describe_rc(0x28B), "TPM_RC_HANDLE (handle 2)");
  EXPECT_EQ(describe_rc(0x19C), "TPM_RC_KEY (handle 1)");
}

TEST(DescribeRc, Format1WithoutPosition) {
  EXPECT_EQ(describe_rc(0x084), "TPM_RC_VALUE");
  EXPECT_EQ(describe_rc(0x09F), "TPM_RC_INTEGRITY");
  EXPECT_EQ(describe_rc(0x08B), "TPM_RC_HANDLE");
}

TEST(DescribeRc, Format0Errors) {
  EXPECT_EQ(describe_rc(0x100), "TPM_RC_INITIALIZE");
  EXPECT_EQ(describe_rc(0x101), "TPM_RC_FAILURE");
  EXPECT_EQ(describe_rc(0x143), "TPM_RC_COMMAND_CODE");
  EXPECT_EQ(describe_rc(0x150), "TPM_RC_BAD_CONTEXT");
  EXPECT_EQ(describe_rc(0x149), "TPM_RC_NV_AUTHORIZATION");
}

TEST(DescribeRc, UnknownCodesPrintHex) {
  EXPECT_EQ(describe_rc(0x00012345), "0x00012345 (unknown response code)");
  EXPECT_EQ(describe_rc(0x1ff), "0x000001ff (unknown response code)");
  EXPECT_EQ(describe_rc(0x97f), "0x0000097f (unknown response code)");
  EXPECT_EQ(describe_rc(0xbad), "0x00000bad (unknown response code)");
  EXPECT_EQ(describe_rc(0x80001000), "0x80001000 (unknown response code)");
  // A TSS-layer code whose low bits look like BAD_AUTH is not a TPM code.
  EXPECT_EQ(describe_rc(0x000B09A2), "0x000b09a2 (unknown response code)");
}

TEST(RcBase, StripsPosition) {
  EXPECT_EQ(rc_base(0x9A2), rc::kBadAuth);
  EXPECT_EQ(rc_base(0x1C4), rc::kValue);
  EXPECT_EQ(rc_base(0xFC4), rc::kValue);
  EXPECT_EQ(rc_base(0x18B), rc::kHandle);
  EXPECT_EQ(rc_base(0x98E), rc::kAuthFail);
  EXPECT_EQ(rc_base(0x08B), rc::kHandle);
  EXPECT_EQ(rc_base(0x1D5), rc::kSize);
}

TEST(RcBase, LeavesFormat0AndForeignCodes) {
  EXPECT_EQ(rc_base(0x922), rc::kRetry);
  EXPECT_EQ(rc_base(0x100), rc::kInitialize);
  EXPECT_EQ(rc_base(0x101), rc::kFailure);
  EXPECT_EQ(rc_base(0x150), rc::kBadContext);
  EXPECT_EQ(rc_base(0x000B09A2), 0x000B09A2u);
  EXPECT_EQ(rc_base(0), 0u);
}

TEST(RcIsRetryable, OnlyRetryYieldedTesting) {
  EXPECT_TRUE(rc_is_retryable(rc::kRetry));
  EXPECT_TRUE(rc_is_retryable(rc::kYielded));
  EXPECT_TRUE(rc_is_retryable(rc::kTesting));
  EXPECT_FALSE(rc_is_retryable(0));
  EXPECT_FALSE(rc_is_retryable(rc::kObjectMemory));
  EXPECT_FALSE(rc_is_retryable(rc::kSessionMemory));
  EXPECT_FALSE(rc_is_retryable(rc::kContextGap));
  EXPECT_FALSE(rc_is_retryable(rc::kNvUnavailable));
  EXPECT_FALSE(rc_is_retryable(0x9A2));
  EXPECT_FALSE(rc_is_retryable(rc::kInitialize));
  EXPECT_FALSE(rc_is_retryable(rc::kFailure));
  EXPECT_FALSE(rc_is_retryable(0x00010922)) << "not a TPM-layer code";
}

TEST(RcFailedSession, OnlySessionRelativeAuthFailures) {
  EXPECT_EQ(rc_failed_session(0x9A2), std::optional<size_t>(0));  // TPM_RC_BAD_AUTH (session 1)
  EXPECT_EQ(rc_failed_session(0xB8E), std::optional<size_t>(2));  // TPM_RC_AUTH_FAIL (session 3)
  EXPECT_EQ(rc_failed_session(0x919), std::optional<size_t>(1));  // TPM_RC_REFERENCE_S1
  EXPECT_EQ(rc_failed_session(0x91E), std::optional<size_t>(6));  // TPM_RC_REFERENCE_S6
  // Bit 6 makes bits 8-11 a parameter number, even when bit 11 is set:
  // 0x29CE is TPM_RC_AUTH_FAIL (parameter 9), no session's fault.
  EXPECT_EQ(describe_rc(0x29CE), "TPM_RC_AUTH_FAIL (parameter 9)");
  EXPECT_EQ(rc_failed_session(0x29CE), std::nullopt);
  EXPECT_EQ(rc_failed_session(0x18E), std::nullopt);       // handle 1
  EXPECT_EQ(rc_failed_session(0x88E), std::nullopt);       // session 0 does not exist
  EXPECT_EQ(rc_failed_session(0x984), std::nullopt);       // TPM_RC_VALUE (session 1)
  EXPECT_EQ(rc_failed_session(0x910), std::nullopt);       // TPM_RC_REFERENCE_H0
  EXPECT_EQ(rc_failed_session(0x000B09A2), std::nullopt);  // not a TPM-layer code
}

// A wrapper gives the TPM's answer about its own read of a handle's Name as
// the error of the caller's command, numbered for that handle.
TEST(ResponseCode, RenumberedForAnotherHandle) {
  EXPECT_EQ(rc_for_handle(0x18B, 1), 0x28Bu);  // TPM_RC_HANDLE: handle 1 -> handle 2
  EXPECT_EQ(rc_for_handle(0x28B, 0), 0x18Bu);
  EXPECT_EQ(rc_for_handle(0x184, 2), 0x384u);  // TPM_RC_VALUE (handle 1) -> handle 3
  EXPECT_EQ(rc_for_handle(0x910, 1), 0x911u);  // TPM_RC_REFERENCE_H0 -> H1
  EXPECT_EQ(rc_for_handle(0x103, 1), 0x103u);  // TPM_RC_SEQUENCE: about no handle
  EXPECT_EQ(rc_for_handle(0x98E, 1), 0x98Eu);  // a session's: left as it is
  EXPECT_EQ(rc_for_handle(0x1C4, 1), 0x1C4u);  // a parameter's: left as it is
  EXPECT_EQ(rc_for_handle(0x922, 1), 0x922u);  // TPM_RC_RETRY
  EXPECT_EQ(rc_for_handle(0x18B, 7), 0x18Bu);  // no eighth handle
}

TEST(ResponseCode, WhatACodeBlames) {
  EXPECT_TRUE(rc_is_about_handle_or_command(0x18B));   // TPM_RC_HANDLE, handle 1
  EXPECT_TRUE(rc_is_about_handle_or_command(0x103));   // TPM_RC_SEQUENCE
  EXPECT_TRUE(rc_is_about_handle_or_command(0x922));   // TPM_RC_RETRY
  EXPECT_TRUE(rc_is_about_handle_or_command(0x911));   // TPM_RC_REFERENCE_H1
  EXPECT_FALSE(rc_is_about_handle_or_command(0x918));  // TPM_RC_REFERENCE_S0
  EXPECT_FALSE(rc_is_about_handle_or_command(0x98E));  // TPM_RC_AUTH_FAIL, session 1
  EXPECT_FALSE(rc_is_about_handle_or_command(0x98B));  // TPM_RC_HANDLE, session 1
  EXPECT_FALSE(rc_is_about_handle_or_command(0x1C4));  // TPM_RC_VALUE, parameter 1
}

TEST(TpmError, CarriesCodeAndDescription) {
  Error e = tpm_error(0x9A2, "PCR_Extend");
  EXPECT_EQ(e.kind(), ErrorKind::kTpm);
  EXPECT_EQ(e.tpm_rc(), 0x9A2u);
  EXPECT_EQ(e.message(), "TPM error TPM_RC_BAD_AUTH (session 1) from PCR_Extend");
}

}  // namespace
}  // namespace tpmsec
