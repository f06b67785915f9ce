// The rules that make a profile's values from tpm2-algtest's measured
// operations (algtest_rules.h).
#include "algtest_rules.h"

#include <fmt/format.h>

#include <cmath>

#include "algtest_values.h"
#include "tpmsec/order_statistics.h"

namespace tpmsec::algtest {
namespace {

// The values of a profile from the merged operations, by the rules of
// docs/latency-profiles.md ("Rules for profiles from tpm2-algtest"): M for
// what algtest measures, P for key creation, D by the rules A1-A6, E where
// no rule has a measured basis. Every rule scales from the short command
// level `s` (GetRandom(32) on the same driver path).
class ValueRules {
 public:
  ValueRules(const std::vector<const AlgtestRun*>& kept, const std::string& source)
      : b_{source},
        source_(source),
        get_random_(merge(kept, "GetRandom")),
        hash_(merge(kept, "Hash")),
        hmac_(merge(kept, "HMAC")),
        ecdsa_(merge(kept, "Sign.ecdsa_p256")),
        oaep_(merge(kept, "RSA_Decrypt.oaep_2048")),
        create_ecc_(merge(kept, "Create.ecc_p256")),
        create_rsa_(merge(kept, "Create.rsa_2048")),
        zgen2_(merge(kept, "ZGen_2Phase.p256")),
        ecdh_(merge(kept, "ECDH_ZGen.p256")),
        aes_(merge(kept, "EncryptDecrypt.aes128_cfb")),
        s_(get_random_.ms),
        short_text_(fmt::format("GetRandom(32) {:.2f} ms (M)", s_)) {}

  // Every value of `p`: command variants, tail events, the session and
  // encryption costs.
  void set_values(LatencyProfile& p) const {
    p.commands["GetRandom"] = b_.measured(get_random_, kTagMeasured, "TPM2_GetRandom of 32 bytes");
    p.commands["FlushContext"] = short_value("FlushContext");
    p.commands["PCR_Read"] = short_value("PCR_Read");
    p.commands["StartAuthSession.unsalted"] = short_value("unsalted StartAuthSession (nonce generation only)");
    p.commands["default"] = short_value("any other command");
    set_hash_values(p);
    p.commands["StartAuthSession.ecc"] = ecc_session();
    p.commands["StartAuthSession.rsa"] = rsa_session();
    set_context_values(p);
    p.commands["CreatePrimary.ecc"] = create_primary_ecc();
    set_create_primary_rsa(p);
    p.hmac_session = hmac_session();
    p.param_encryption_per_byte = param_encryption_per_byte();
  }

 private:
  // A3: every short command costs what GetRandom(32) does on the same path.
  LatencyValue short_value(const char* what) const {
    return b_.derived(s_, kTagDerived, fmt::format("{} {}, rule A3", source_, runs_text(get_random_.labels)),
                      fmt::format("rule A3 ({}): {} ~ a short command = {}", kRules, what, short_text_),
                      stated_error("FlushContext"));
  }

  // Hash is measured; A4: PCR_Extend (one SHA-256 bank) ~ Hash of 256 bytes.
  void set_hash_values(LatencyProfile& p) const {
    if (!hash_.present) {
      p.commands["Hash"] = short_value("Hash (no successful TPM2_Hash in the runs)");
      p.commands["PCR_Extend"] = short_value("PCR_Extend (no TPM2_Hash in the runs)");
      return;
    }
    p.commands["Hash"] = b_.measured(hash_, kTagMeasured, "TPM2_Hash SHA-256 of 256 bytes");
    p.commands["PCR_Extend"] = b_.derived(
        hash_.ms, kTagDerived, fmt::format("{} {}, rule A4", source_, runs_text(hash_.labels)),
        fmt::format("rule A4 ({}): PCR_Extend ~ TPM2_Hash SHA-256 of 256 bytes {:.2f} ms (M): a digest and a PCR "
                    "update are hash work plus the command overhead",
                    kRules, hash_.ms),
        stated_error("PCR_Extend"));
  }

  // A1: ECC-salted StartAuthSession: one P-256 ECDH (the salt's KDFe point
  // multiplication) plus a short command. ECDH_ZGen is that operation;
  // ZGen_2Phase does two multiplications; ECDSA sign one, as a last resort.
  LatencyValue ecc_session() const {
    double ms = 0;
    std::string how;
    const Merged* basis = nullptr;
    if (ecdh_.present) {
      ms = ecdh_.ms + s_;
      how = fmt::format("ECDH_ZGen P-256 {:.2f} ms (M) + {}", ecdh_.ms, short_text_);
      basis = &ecdh_;
    } else if (zgen2_.present) {
      ms = (zgen2_.ms + s_) / 2 + s_;
      how = fmt::format("half of ZGen_2Phase P-256 {:.2f} ms (M; two multiplications, one command overhead) + {}",
                        zgen2_.ms, short_text_);
      basis = &zgen2_;
    } else if (ecdsa_.present) {
      ms = ecdsa_.ms + s_;
      how = fmt::format("ECDSA P-256 sign {:.2f} ms (M; one multiplication, no ECDH measured) + {}", ecdsa_.ms,
                        short_text_);
      basis = &ecdsa_;
    }
    if (!basis) {
      return b_.derived(4 * s_, kTagEstimate, "rule A1 fallback",
                        "rule A1: no ECC operation succeeded; 4 x a short command", 0);
    }
    return b_.derived(ms, kTagDerived, fmt::format("{} {}, rule A1", source_, runs_text(basis->labels)),
                      fmt::format("rule A1 ({}): ECC-salted StartAuthSession ~ {}", kRules, how),
                      stated_error("StartAuthSession.ecc"));
  }

  // A2: RSA-salted StartAuthSession: the OAEP decrypt of the salt plus a short command.
  LatencyValue rsa_session() const {
    if (!oaep_.present) {
      return b_.derived(100 * s_, kTagEstimate, "rule A2 fallback",
                        "rule A2: no RSA-2048 OAEP decrypt succeeded; 100 x a short command", 0);
    }
    return b_.derived(
        oaep_.ms + s_, kTagDerived, fmt::format("{} {}, rule A2", source_, runs_text(oaep_.labels)),
        fmt::format("rule A2 ({}): RSA-salted StartAuthSession ~ RSA-2048 OAEP decrypt {:.2f} ms (M) + {}; not "
                    "validated (no chip has a measured RSA-salted StartAuthSession)",
                    kRules, oaep_.ms, short_text_),
        0);
  }

  // A5: ContextLoad of a key ~ 12 short commands (E rule 5 with the short
  // command for FlushContext); a session's ContextLoad (E rule 5) and
  // ContextSave (T1) are estimates from it and the short command.
  void set_context_values(LatencyProfile& p) const {
    double load = 12 * s_;
    p.commands["ContextLoad.object"] = b_.derived(
        load, kTagDerived, fmt::format("{} {}, rule A5", source_, runs_text(get_random_.labels)),
        fmt::format("rule A5 ({}): ContextLoad of a key ~ 12 x FlushContext (E rule 5) = 12 x {}", kRules, short_text_),
        stated_error("ContextLoad.object"));
    p.commands["ContextLoad.session"] = b_.derived(
        load, kTagEstimate, "E rule 5",
        fmt::format("E rule 5: ContextLoad of a session is measured on no chip; = ContextLoad of a key {:.2f} ms "
                    "(the seed thread's guess, an upper bound)",
                    load),
        0);
    for (const char* v : {"ContextSave.object", "ContextSave.session"}) {
      p.commands[v] =
          b_.derived(4 * s_, kTagEstimate, "tpmsec rule T1",
                     fmt::format("tpmsec rule T1: ContextSave ~ 4 x FlushContext = 4 x {}", short_text_), 0);
    }
  }

  // P: CreatePrimary of an ECC key ~ TPM2_Create of one (A7 when none succeeded).
  LatencyValue create_primary_ecc() const {
    if (!create_ecc_.present) {
      return b_.derived(50 * s_, kTagEstimate, "rule A7 fallback",
                        "rule A7: no ECC Create succeeded; 50 x a short command", 0);
    }
    return b_.measured(create_ecc_, kTagProxy, "Proxy: TPM2_Create of an ECC P-256 key");
  }

  // P: CreatePrimary of an RSA key ~ TPM2_Create of one. Key generation is
  // heavy-tailed: with per-iteration data the value is the pooled median and
  // the mean of the top 5% of draws becomes a tail event.
  void set_create_primary_rsa(LatencyProfile& p) const {
    if (!create_rsa_.present) {
      p.commands["CreatePrimary.rsa"] = b_.derived(1000 * s_, kTagEstimate, "rule A7 fallback",
                                                   "rule A7: no RSA Create succeeded; 1000 x a short command", 0);
      return;
    }
    LatencyValue v = b_.measured(create_rsa_, kTagProxy, "Proxy: TPM2_Create of an RSA-2048 key");
    if (create_rsa_.samples.size() >= 20) {
      const std::vector<double>& x = create_rsa_.samples;
      double med = quantile_of(x, 0.5);
      double top_mean = upper_tail_mean(x, 0.95);
      v.ms = r3(med);
      v.jitter_ms = r3(0.3 * med);
      v.low_ms.reset();  // the run averages' range is of means, not of this median
      v.high_ms.reset();
      v.note += fmt::format(
          "; ms is the pooled median of {} key generations (their p95 and the tail event carry "
          "the rest)",
          x.size());
      TailEvent t;
      t.variant = "CreatePrimary.rsa";
      t.probability = 0.05;
      t.extra_ms = r3(top_mean - med);
      t.tag = kTagDerived;
      t.source = v.source;
      t.note = fmt::format(
          "the slowest 5% of {} measured RSA-2048 key generations average {:.0f} ms against a "
          "median of {:.0f} ms",
          x.size(), top_mean, med);
      t.enabled = true;
      p.tail_events.push_back(t);
    }
    p.commands["CreatePrimary.rsa"] = v;
  }

  // A6: the HMAC session's added cost ~ one TPM2_HMAC of 256 bytes.
  LatencyValue hmac_session() const {
    if (!hmac_.present) {
      return b_.derived(4 * s_, kTagEstimate, "rule A6 fallback",
                        "rule A6: no successful TPM2_HMAC; 4 x a short command", 0);
    }
    return b_.derived(
        hmac_.ms, kTagDerived, fmt::format("{} {}, rule A6", source_, runs_text(hmac_.labels)),
        fmt::format("rule A6 ({}): HMAC session overhead ~ TPM2_HMAC SHA-256 of 256 bytes {:.2f} ms (M): the "
                    "command and response HMACs and the nonce",
                    kRules, hmac_.ms),
        stated_error("hmac_session"));
  }

  // A8: parameter encryption per byte from AES-128-CFB EncryptDecrypt of 256
  // bytes, less a short command; T2 (an estimate scaled by the HMAC cost) without it.
  LatencyValue param_encryption_per_byte() const {
    if (aes_.present && aes_.ms > s_) {
      LatencyValue v = b_.derived(
          (aes_.ms - s_) / 256.0, kTagDerived, fmt::format("{} {}, rule A8", source_, runs_text(aes_.labels)),
          fmt::format("rule A8 ({}): (EncryptDecrypt AES-128-CFB of 256 bytes {:.2f} ms (M) - {}) / 256; not validated",
                      kRules, aes_.ms, short_text_),
          0);
      v.ms = round_to((aes_.ms - s_) / 256.0, 1e-6);
      v.jitter_ms = round_to(v.ms * 0.02, 1e-7);
      return v;
    }
    double ratio = hmac_.present ? hmac_.ms / 14.61 : 1.0;
    LatencyValue v = b_.derived(
        0.005 * ratio, kTagEstimate, "tpmsec rule T2",
        fmt::format("tpmsec rule T2 (pure estimate): 0.005 ms per byte on the SLB9670, scaled by the HMAC ratio "
                    "{:.2f} / 14.61 ms; no AES-128-CFB EncryptDecrypt succeeded in the runs",
                    hmac_.present ? hmac_.ms : 14.61),
        0);
    v.ms = round_to(0.005 * ratio, 1e-6);
    v.jitter_ms = round_to(0.0001 * ratio, 1e-7);
    return v;
  }

  static constexpr const char* kRules = "docs/latency-profiles.md";
  Builder b_;
  std::string source_;
  Merged get_random_, hash_, hmac_, ecdsa_, oaep_, create_ecc_, create_rsa_, zgen2_, ecdh_, aes_;
  double s_;                // a short command on this chip, driver path included
  std::string short_text_;  // how notes cite it
};

}  // namespace

void set_rule_values(LatencyProfile& p, const std::vector<const AlgtestRun*>& kept, const std::string& source) {
  ValueRules(kept, source).set_values(p);
}

}  // namespace tpmsec::algtest
