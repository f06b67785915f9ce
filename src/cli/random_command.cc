// tpmsec random N: random bytes from the TPM, parameter-encrypted by default.
#include <fmt/format.h>

#include "cli.h"
#include "protection_options.h"

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
  sub->add_option("--protect", o->protect,
                  "encrypt (default): the response is AES-CFB parameter-encrypted and HMAC-verified; none: in the clear")
      ->check(CLI::IsMember({"encrypt", "none"}))
      ->capture_default_str();
  sub->add_flag("--xor", o->use_xor, "Use XOR obfuscation instead of AES-CFB for the encryption");
  o->tpm.add_to(sub);
  o->protection.add_to(sub);
  sub->callback([o, action] {
    *action = [o]() -> Status {
      if (o->count.empty() || o->count.size() > 2 || o->count.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(o->count) < 1 || std::stoi(o->count) > 64) {
        return usage_error(fmt::format("N must be a number from 1 to 64, got '{}'", o->count));
      }
      if (o->use_xor && o->protect != "encrypt") return usage_error("--xor needs --protect encrypt");
      cmd::GetRandom c{static_cast<uint16_t>(std::stoi(o->count))};
      TPMSEC_ASSIGN_OR_RETURN(OpenTpm open, open_tpm(o->tpm));
      Bytes bytes;
      if (o->protect == "encrypt") {
        const TpmInfo& info = open.info();
        SymDef sym = o->use_xor ? SymDef::xor_with(alg::kSha256) : SymDef::aes128_cfb();
        TPMSEC_ASSIGN_OR_RETURN(auto factory, o->protection.factory(open.tpm(), info, sym));
        TPMSEC_ASSIGN_OR_RETURN(auto session, factory->start(attr::kEncrypt));
        TPMSEC_ASSIGN_OR_RETURN(auto rsp, open.tpm().run(c, {Auth{session.get(), {}}}));
        bytes = std::move(rsp.random_bytes.bytes);
      } else {
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
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "null-key", "Print the null key's name as /sys/class/tpm/tpm0/null_name shows it (68 lowercase hex digits)");
  o->tpm.add_to(sub);
  sub->add_option("--salt", o->protection.salt, "Key type: auto, ecc (Linux's template) or rsa")
      ->check(CLI::IsMember({"auto", "ecc", "rsa"}))
      ->capture_default_str();
  sub->add_option("--null-name", o->protection.null_name, "Check against this pinned name (hex or file); exit 3 if it differs");
  sub->callback([o, action] {
    *action = [o]() -> Status {
      TPMSEC_ASSIGN_OR_RETURN(OpenTpm open, open_tpm(o->tpm));
      const TpmInfo& info = open.info();
      TPMSEC_ASSIGN_OR_RETURN(auto factory, o->protection.factory(open.tpm(), info, SymDef::aes128_cfb()));
      fmt::print("{}\n", factory->null_key()->name_hex());
      return ok_status();
    };
  });
}

}  // namespace tpmsec::cli
