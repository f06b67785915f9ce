// tpmsec random N: random bytes from the TPM, parameter-encrypted by default.
#include <fmt/format.h>

#include "cli.h"
#include "protection_options.h"
#include "tpmsec/provision.h"

namespace tpmsec::cli {

void register_random(CLI::App& app, Action* action) {
  struct Options {
    TpmOption tpm;
    ProtectionOptions protection;
    std::string count;
    std::string protect = "encrypt";
    bool use_xor = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("random", "Print N random bytes from the TPM as hex");
  sub->add_option("N", o->count, "Number of bytes (1-64)")->required();
  sub->add_option(
         "--protect", o->protect,
         "encrypt (default): the response is AES-CFB parameter-encrypted and HMAC-verified; none: in the clear")
      ->check(CLI::IsMember({"encrypt", "none"}))
      ->capture_default_str();
  sub->add_flag("--xor", o->use_xor, "Use XOR obfuscation instead of AES-CFB for the encryption");
  o->tpm.add_to(sub);
  o->protection.add_to(sub, o->tpm);
  sub->callback([o, action] {
    *action = [o]() -> Status {
      if (o->count.empty() || o->count.size() > 2 || o->count.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(o->count) < 1 || std::stoi(o->count) > 64) {
        return usage_error(fmt::format("N must be a number from 1 to 64, got '{}'", o->count));
      }
      if (o->use_xor && o->protect != "encrypt") return usage_error("--xor needs --protect encrypt");
      cmd::GetRandom c{static_cast<uint16_t>(std::stoi(o->count))};
      TPMSEC_ASSIGN_OR_RETURN(ProtectRequest request, o->protection.request());
      TPMSEC_ASSIGN_OR_RETURN(OpenTpm open, open_protected(o->tpm, std::move(request)));
      ProtectedTpm* protect = open.protect.get();
      Bytes bytes;
      // A tpmsec server encrypts and verifies the response itself (its
      // session goes on every command): nothing of this process's to add.
      if (o->use_xor && protect->served()) {
        return usage_error("--xor: a tpmsec server (serve:) chooses its own session's encryption");
      }
      if (o->protect == "encrypt" && !protect->served()) {
        SymDef sym = o->use_xor ? SymDef::xor_with(alg::kSha256) : SymDef::aes128_cfb();
        TPMSEC_ASSIGN_OR_RETURN(auto factory, protect->factory(sym));
        TPMSEC_ASSIGN_OR_RETURN(auto session, factory->start(attr::kEncrypt));
        TPMSEC_ASSIGN_OR_RETURN(auto rsp, open.tpm().run(c, {Auth{session.get(), {}}}));
        bytes = std::move(rsp.random_bytes.bytes);
      } else {
        TPMSEC_RETURN_IF_ERROR(protect->check_named_anchor());
        TPMSEC_ASSIGN_OR_RETURN(auto rsp, open.tpm().run(c));
        bytes = std::move(rsp.random_bytes.bytes);
      }
      if (bytes.size() != c.bytes_requested) {
        return parse_error(fmt::format("TPM returned {} bytes, {} requested", bytes.size(), c.bytes_requested));
      }
      fmt::print("{}\n", to_hex(bytes));
      return ok_status();
    };
  });
}

void register_null_key(CLI::App& app, Action* action) {
  struct Options {
    TpmOption tpm;
    ProtectionOptions protection;
    bool forget = false;
  };
  auto o = std::make_shared<Options>();
  o->protection.use_provisioned = false;
  CLI::App* sub = app.add_subcommand(
      "null-key", "Print the null key's name as /sys/class/tpm/tpm0/null_name shows it (68 lowercase hex digits)");
  o->tpm.add_to(sub);
  sub->add_option("--salt", o->protection.salt, "Key type: auto, ecc (Linux's template) or rsa")
      ->check(CLI::IsMember({"auto", "ecc", "rsa"}))
      ->capture_default_str();
  o->protection.add_null_name_to(sub, "Check against this pinned name (hex or file); exit 3 if it differs");
  sub->add_flag("--forget", o->forget,
                "Forget the --tofu pins (and the null key kept for one-shot commands) for this TPM string, after "
                "a TPM reset you caused, and the --ek-ca EK pin, after replacing the TPM; prints nothing else and "
                "talks to no TPM");
  sub->callback([o, action] {
    *action = [o]() -> Status {
      if (o->forget) {
        if (o->protection.anchor_given()) return usage_error("--forget takes no --null-name");
        // By the TPM string's identity alone: `null-key --forget` opens no TPM.
        const Result<ResolvedTpm>& tpm = o->tpm.resolved();
        if (!tpm.ok()) return tpm.error();
        TPMSEC_ASSIGN_OR_RETURN(ForgottenPins forgot, forget_pins(tpm_id_of(tpm->spec)));
        fmt::print(stderr, "tpmsec: {} for {}\n", forgot.tofu_pin ? "forgot the --tofu pin" : "no --tofu pin kept",
                   forgot.tpm);
        if (forgot.ek_pin) fmt::print(stderr, "tpmsec: forgot the --ek-ca EK pin for {}\n", forgot.tpm);
        return ok_status();
      }
      TPMSEC_ASSIGN_OR_RETURN(ProtectRequest request, o->protection.request());
      TPMSEC_ASSIGN_OR_RETURN(OpenTpm open, open_protected(o->tpm, std::move(request)));
      ProtectedTpm* protect = open.protect.get();
      ProtectionConfig config = protect->protection();
      if (protect->served()) {
        // The server put its session on the CreatePrimary and verified the
        // answer: the name is the TPM's, as far as the server is trusted.
        config.trust_first_use = true;
      } else if (!protect->anchored()) {
        // Printing a name is how a user learns one to pin: allowed, but said
        // to be whatever answered on the bus.
        config.trust_first_use = true;
        fmt::print(stderr,
                   "tpmsec: note: this name is what answered on the bus, unauthenticated: compare it with the "
                   "kernel's /sys/class/tpm/tpm0/null_name or certify the key before pinning it\n");
      }
      TPMSEC_ASSIGN_OR_RETURN(auto factory, SessionFactory::create(open.tpm(), config, &open.info()));
      fmt::print("{}\n", factory->null_key()->name_hex());
      return ok_status();
    };
  });
}

}  // namespace tpmsec::cli
