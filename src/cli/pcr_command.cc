// tpmsec pcr read|extend|reset
#include <fmt/format.h>

#include "cli.h"
#include "protection_options.h"
#include "strategy_option.h"
#include "tpmsec/pcr.h"
#include "tpmsec/strategy.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec::cli {
namespace {

struct PcrOptions {
  TpmOption tpm;
  std::string index;
  std::string bank = "sha256";
  std::string digest;
  bool read_back = false;
  bool force_pcr = false;
  std::string protect;
  ProtectionOptions protection;
  StrategyOption strategy;
};

// Parses the shared arguments and checks them against the TPM.
struct PcrTarget {
  OpenTpm open;
  uint32_t index = 0;
  uint16_t bank = 0;
};

// A kernel TPM device: its PCRs 0-15 are what verifiers trust.
bool is_device_spec(const std::string& tpm) {
  auto spec = parse_transport_spec(tpm.empty() ? default_transport_spec() : tpm);
  return spec.ok() && spec->scheme == "device";
}

Result<PcrTarget> open_target(const PcrOptions& o) {
  PcrTarget t;
  TPMSEC_ASSIGN_OR_RETURN(t.index, parse_pcr_index(o.index));
  TPMSEC_ASSIGN_OR_RETURN(t.bank, parse_bank(o.bank));
  TPMSEC_ASSIGN_OR_RETURN(t.open, open_tpm(o.tpm));
  TPMSEC_RETURN_IF_ERROR(check_pcr(t.open.info(), t.bank, t.index));
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
        TPMSEC_ASSIGN_OR_RETURN(auto factory, read->protection.factory(t.open.tpm(), t.open.transport(), t.open.info(),
                                                                              SymDef::aes128_cfb()));
        TPMSEC_ASSIGN_OR_RETURN(auto session, factory->start(attr::kAudit | attr::kContinueSession));
        Auth audit{session.get(), {}};
        TPMSEC_ASSIGN_OR_RETURN(value, pcr_read(t.open.tpm(), t.bank, t.index, std::span<const Auth>(&audit, 1)));
      } else {
        TPMSEC_RETURN_IF_ERROR(read->protection.verify_given_anchor(t.open.tpm(), t.open.transport(), t.open.info()));
        TPMSEC_ASSIGN_OR_RETURN(value, pcr_read(t.open.tpm(), t.bank, t.index));
      }
      fmt::print("{}\n", to_hex(value));
      return ok_status();
    };
  });

  auto extend = std::make_shared<PcrOptions>();
  CLI::App* ext = add_pcr_subcommand(
      pcr, "extend", "Extend a PCR with a digest, protected as the policy decides for this TPM (or --strategy)",
      extend, true);
  ext->add_option("--protect", extend->protect,
                  "Shorthand kept from earlier versions: hmac = --strategy per-command (Linux 6.10), none = "
                  "--strategy plain (tpm.disable_pcr_integrity=1)")
      ->check(CLI::IsMember({"hmac", "none"}));
  extend->strategy.add_to(ext);
  extend->protection.add_to(ext);
  ext->add_option("DIGEST", extend->digest, "Digest as hex, the bank's size (64 hex digits for sha256)")->required();
  ext->add_flag("--read-back", extend->read_back, "Read the PCR afterwards and print its new value");
  ext->add_flag("--force-pcr", extend->force_pcr,
                "Allow PCRs 0-15 of a device: TPM (they cannot be reset: what a verifier sees stays changed)");
  ext->callback([extend, action] {
    *action = [extend]() -> Status {
      // Check the arguments before touching the TPM.
      TPMSEC_ASSIGN_OR_RETURN(Bytes digest, from_hex(extend->digest));
      TPMSEC_ASSIGN_OR_RETURN(uint16_t bank, parse_bank(extend->bank));
      TPMSEC_RETURN_IF_ERROR(check_digest_length(bank, digest));
      StrategyOption choice = extend->strategy;
      if (!extend->protect.empty()) {
        if (!choice.strategy.empty()) return usage_error("give --strategy or --protect, not both");
        choice.strategy = extend->protect == "hmac" ? "per-command" : "plain";
      }
      if (!choice.strategy.empty()) TPMSEC_RETURN_IF_ERROR(status_of(parse_strategy(choice.strategy)));
      // Refused before the device is opened: nothing of it is touched.
      TPMSEC_ASSIGN_OR_RETURN(uint32_t index, parse_pcr_index(extend->index));
      if (!pcr_resettable(index) && !extend->force_pcr && is_device_spec(extend->tpm.spec)) {
        return usage_error(fmt::format("PCR {} of a real TPM cannot be reset: what a verifier sees would stay "
                                       "changed until reboot. Use 16 or 23, or give --force-pcr",
                                       index));
      }
      TPMSEC_ASSIGN_OR_RETURN(PcrTarget t, open_target(*extend));
      StreamOptions options;
      options.pcr = t.index;
      options.bank = t.bank;
      TPMSEC_ASSIGN_OR_RETURN(options.protection, extend->protection.config(t.open.transport(), t.open.info(), SymDef::aes128_cfb()));
      TPMSEC_ASSIGN_OR_RETURN(StrategyKind kind, choice.resolve(*t.open.measured, options.protection));
      if (kind == StrategyKind::kPlain) {
        // No session: a pin the user gave is checked anyway, never ignored.
        TPMSEC_RETURN_IF_ERROR(
            extend->protection.verify_given_anchor(t.open.tpm(), t.open.transport(), t.open.info()));
      }
      // The stream reads the PCR through an audit session first, so a failed
      // extend is never retried blindly and checkpoint can verify the result.
      TPMSEC_ASSIGN_OR_RETURN(auto stream, ExtendStream::open(t.open.tpm(), kind, options, &t.open.info()));
      TPMSEC_RETURN_IF_ERROR(stream->extend(digest));
      TPMSEC_RETURN_IF_ERROR(stream->finish());
      if (extend->read_back) {
        TPMSEC_ASSIGN_OR_RETURN(Bytes value, pcr_read(t.open.tpm(), t.bank, t.index));
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
          return pcr_reset(t.open.tpm(), t.index);
        };
      });
}

}  // namespace tpmsec::cli
