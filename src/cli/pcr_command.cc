// tpmsec pcr read|extend|reset
#include <fmt/format.h>

#include "cli.h"
#include "protection_options.h"
#include "tpmsec/pcr.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec::cli {
namespace {

struct PcrOptions {
  TpmOption tpm;
  std::string index;
  std::string bank = "sha256";
  std::string digest;
  bool read_back = false;
  std::string protect;
  ProtectionOptions protection;
};

// Parses the shared arguments and checks them against the TPM.
struct PcrTarget {
  OpenTpm open;
  TpmInfo info;
  uint32_t index = 0;
  uint16_t bank = 0;
};

Result<PcrTarget> open_target(const PcrOptions& o) {
  PcrTarget t;
  TPMSEC_ASSIGN_OR_RETURN(t.index, parse_pcr_index(o.index));
  TPMSEC_ASSIGN_OR_RETURN(t.bank, parse_bank(o.bank));
  TPMSEC_ASSIGN_OR_RETURN(t.open, open_tpm(o.tpm));
  TPMSEC_ASSIGN_OR_RETURN(t.info, read_tpm_info(*t.open.tpm));
  TPMSEC_RETURN_IF_ERROR(check_pcr(t.info, t.bank, t.index));
  return t;
}

CLI::App* add_pcr_subcommand(CLI::App* pcr, const char* name, const char* help, const std::shared_ptr<PcrOptions>& o,
                             bool with_bank) {
  CLI::App* sub = pcr->add_subcommand(name, help);
  sub->add_option("INDEX", o->index, "PCR index")->required();
  if (with_bank) sub->add_option("--bank", o->bank, "PCR bank (sha1, sha256, sha384, sha512)")->capture_default_str();
  o->tpm.add_to(sub);
  return sub;
}

}  // namespace

void register_pcr(CLI::App& app, Action* action) {
  CLI::App* pcr = app.add_subcommand("pcr", "Read, extend or reset a PCR");
  pcr->require_subcommand(1);

  auto read = std::make_shared<PcrOptions>();
  read->protect = "none";
  CLI::App* rd = add_pcr_subcommand(pcr, "read", "Print a PCR's value as lowercase hex", read, true);
  rd->add_option("--protect", read->protect,
                 "none, or audit: the response is authenticated by an audit-attributed salted HMAC session "
                 "(Linux never protects reads)")
      ->check(CLI::IsMember({"none", "audit"}))
      ->capture_default_str();
  read->protection.add_to(rd);
  rd->callback([read, action] {
    *action = [read]() -> Status {
      TPMSEC_ASSIGN_OR_RETURN(PcrTarget t, open_target(*read));
      Bytes value;
      if (read->protect == "audit") {
        TPMSEC_ASSIGN_OR_RETURN(auto factory, read->protection.factory(*t.open.tpm, t.info, SymDef::aes128_cfb()));
        TPMSEC_ASSIGN_OR_RETURN(auto session, factory->start(attr::kAudit | attr::kContinueSession));
        Auth audit{session.get(), {}};
        TPMSEC_ASSIGN_OR_RETURN(value, pcr_read(*t.open.tpm, t.bank, t.index, std::span<const Auth>(&audit, 1)));
      } else {
        TPMSEC_ASSIGN_OR_RETURN(value, pcr_read(*t.open.tpm, t.bank, t.index));
      }
      fmt::print("{}\n", to_hex(value));
      return ok_status();
    };
  });

  auto extend = std::make_shared<PcrOptions>();
  extend->protect = "hmac";
  CLI::App* ext = add_pcr_subcommand(pcr, "extend", "Extend a PCR with a digest, HMAC-protected by default", extend, true);
  ext->add_option("--protect", extend->protect,
                  "hmac (default): a salted HMAC session on the null key, as Linux 6.10; none: password "
                  "authorization, no protection (tpm.disable_pcr_integrity=1)")
      ->check(CLI::IsMember({"hmac", "none"}))
      ->capture_default_str();
  extend->protection.add_to(ext);
  ext->add_option("DIGEST", extend->digest, "Digest as hex, the bank's size (64 hex digits for sha256)")->required();
  ext->add_flag("--read-back", extend->read_back, "Read the PCR afterwards and print its new value");
  ext->callback([extend, action] {
    *action = [extend]() -> Status {
      // Check the argument before touching the TPM.
      TPMSEC_ASSIGN_OR_RETURN(Bytes digest, from_hex(extend->digest));
      TPMSEC_ASSIGN_OR_RETURN(uint16_t bank, parse_bank(extend->bank));
      TPMSEC_RETURN_IF_ERROR(check_digest_length(bank, digest));
      TPMSEC_ASSIGN_OR_RETURN(PcrTarget t, open_target(*extend));
      if (extend->protect == "hmac") {
        TPMSEC_ASSIGN_OR_RETURN(auto factory, extend->protection.factory(*t.open.tpm, t.info, SymDef::aes128_cfb()));
        TPMSEC_ASSIGN_OR_RETURN(auto session, factory->start(0));  // one-shot, like the kernel
        TPMSEC_RETURN_IF_ERROR(pcr_extend(*t.open.tpm, t.bank, t.index, digest, Auth{session.get(), {}}));
      } else {
        TPMSEC_RETURN_IF_ERROR(pcr_extend(*t.open.tpm, t.bank, t.index, digest));
      }
      if (extend->read_back) {
        TPMSEC_ASSIGN_OR_RETURN(Bytes value, pcr_read(*t.open.tpm, t.bank, t.index));
        fmt::print("{}\n", to_hex(value));
      }
      return ok_status();
    };
  });

  auto reset = std::make_shared<PcrOptions>();
  add_pcr_subcommand(pcr, "reset", "Reset a resettable PCR (16 or 23 on PC Client TPMs)", reset, false)
      ->callback([reset, action] {
        *action = [reset]() -> Status {
          TPMSEC_ASSIGN_OR_RETURN(PcrTarget t, open_target(*reset));
          return pcr_reset(*t.open.tpm, t.index);
        };
      });
}

}  // namespace tpmsec::cli
