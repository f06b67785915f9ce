#include "support/direct_tpm.h"

#include <gtest/gtest.h>

#include "support/log_builder.h"
#include "tpmsec/constants.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec::testing {

Direct::Direct(const std::string& spec) {
  auto t = open_transport(spec);
  if (!t.ok()) {
    ADD_FAILURE() << "direct connection to " << spec << ": " << t.error().message();
    return;
  }
  transport_ = std::move(*t);
  tpm_ = std::make_unique<Tpm>(*transport_);
}

const Bytes& client_digest() {
  static const Bytes d =
      openssl_digest(alg::kSha256, as_bytes(std::string_view("tpmsec test: the client's measurement")));
  return d;
}

const Bytes& attacker_digest() {
  static const Bytes d =
      openssl_digest(alg::kSha256, as_bytes(std::string_view("tpmsec test: the attacker's measurement")));
  return d;
}

std::vector<uint32_t> list_handles(Tpm& tpm) {
  std::vector<uint32_t> out;
  for (uint32_t first : {ht::kFirstTransient, ht::kFirstLoadedSession, ht::kFirstPolicySession}) {
    auto rsp = tpm.run(cmd::GetCapability{cap::kHandles, first, 64});
    EXPECT_TRUE(rsp.ok()) << rsp.error().message();
    if (!rsp.ok()) continue;
    // A loaded policy session is listed under 0x02000000 as 0x03… (Part 3
    // §30.2; LedgerAttackTest.LoadedSessionsAreListedByType): sessions of
    // both types count for both session ranges.
    for (uint32_t h : rsp->capability_data.handles) {
      const bool session = (h >> 24) == ht::kHmacSession || (h >> 24) == ht::kPolicySession;
      if (first == ht::kFirstTransient ? (h >> 24) == ht::kTransient : session) out.push_back(h);
    }
  }
  return out;
}

}  // namespace tpmsec::testing
