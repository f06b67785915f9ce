#include "support/direct_tpm.h"

#include <gtest/gtest.h>

#include "support/log_builder.h"
#include "tpmsec/constants.h"

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
  static const Bytes d = openssl_digest(alg::kSha256, as_bytes(std::string_view("tpmsec test: the client's measurement")));
  return d;
}

const Bytes& attacker_digest() {
  static const Bytes d =
      openssl_digest(alg::kSha256, as_bytes(std::string_view("tpmsec test: the attacker's measurement")));
  return d;
}

}  // namespace tpmsec::testing
