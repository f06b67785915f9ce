// tpmsec pcr read|extend|reset
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "cli.h"
#include "digest_lines.h"
#include "progress.h"
#include "protection_options.h"
#include "strategy_option.h"
#include "tpmsec/pcr.h"
#include "tpmsec/response_code.h"
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
  bool recover = false;  // extend -: the opening audited read, and recovery
  std::string protect;
  uint32_t checkpoint_every = StreamOptions{}.checkpoint_every;
  CLI::Option* checkpoint_every_option = nullptr;  // given: wins over the policy's
  ProtectionOptions protection;
  StrategyOption strategy;
  ProgressFlags progress;  // extend -
};

// Parses the shared arguments and checks them against the TPM.
struct PcrTarget {
  OpenTpm open;
  uint32_t index = 0;
  uint16_t bank = 0;
};

// A kernel TPM device: its PCRs 0-15 are what verifiers trust.
bool is_device_spec(const TpmOption& tpm) {
  const Result<ResolvedTpm>& resolved = tpm.resolved();
  // An error comes when the TPM is opened. The TPM chosen, as it was named.
  return resolved.ok() && resolved->chosen.parsed.kind == TpmKind::kDevice;
}

// `request` resolved on the TPM (open_protected); request.keep: use what
// earlier runs kept for this TPM (session_cache.h).
Result<PcrTarget> open_target(const PcrOptions& o, ProtectRequest request) {
  PcrTarget t;
  TPMSEC_ASSIGN_OR_RETURN(t.index, parse_pcr_index(o.index));
  TPMSEC_ASSIGN_OR_RETURN(t.bank, parse_bank(o.bank));
  TPMSEC_ASSIGN_OR_RETURN(t.open, open_protected(o.tpm, std::move(request)));
  TPMSEC_RETURN_IF_ERROR(check_pcr(t.open.info(), t.bank, t.index));
  return t;
}

CLI::App* add_pcr_subcommand(CLI::App* pcr, const char* name, const char* help, const std::shared_ptr<PcrOptions>& o,
                             bool with_bank, bool changes_state = false) {
  CLI::App* sub = pcr->add_subcommand(name, help);
  sub->add_option("INDEX", o->index, "PCR index")->required();
  if (with_bank) sub->add_option("--bank", o->bank, "PCR bank (sha1, sha256, sha384, sha512)")->capture_default_str();
  o->tpm.add_to(sub, changes_state);
  return sub;
}

// `pcr read`: the value, plain or through an audit session (--protect audit).
Status run_pcr_read(const PcrOptions& read) {
  TPMSEC_ASSIGN_OR_RETURN(ProtectRequest request, read.protection.request());
  TPMSEC_ASSIGN_OR_RETURN(PcrTarget t, open_target(read, std::move(request)));
  ProtectedTpm* protect = t.open.protect.get();
  Bytes value;
  if (read.protect == "audit") {
    TPMSEC_ASSIGN_OR_RETURN(auto reads, protect->audited_pcr_reads());
    TPMSEC_ASSIGN_OR_RETURN(value, reads->read(t.bank, t.index));
  } else {
    TPMSEC_RETURN_IF_ERROR(protect->check_named_anchor());
    TPMSEC_ASSIGN_OR_RETURN(value, pcr_read(t.open.tpm(), t.bank, t.index));
  }
  fmt::print("{}\n", to_hex(value));
  return ok_status();
}

// `pcr extend`'s arguments, checked before the TPM is touched.
struct ExtendArgs {
  bool batch = false;  // DIGEST -: one digest per line of standard input
  uint16_t bank = 0;
  Bytes digest;  // the one digest, without batch
  ProtectRequest request;
};

Result<ExtendArgs> check_pcr_extend_args(const PcrOptions& o) {
  ExtendArgs a;
  a.batch = o.digest == "-";
  TPMSEC_ASSIGN_OR_RETURN(a.bank, parse_bank(o.bank));
  if (!a.batch) {
    TPMSEC_ASSIGN_OR_RETURN(a.digest, from_hex(o.digest));
    TPMSEC_RETURN_IF_ERROR(check_digest_length(a.bank, a.digest));
  }
  StrategyOption choice = o.strategy;
  if (!o.protect.empty()) {
    if (!choice.strategy.empty()) return usage_error("give --strategy or --protect, not both");
    choice.strategy = o.protect == "hmac" ? "per-command" : "plain";
  }
  TPMSEC_ASSIGN_OR_RETURN(a.request, o.protection.request());
  TPMSEC_RETURN_IF_ERROR(choice.apply_to(a.request, o.protection.items_origin()));
  if (o.recover && !a.batch) return usage_error("--recover is for a batch (DIGEST -)");
  if (o.recover && a.request.strategy == StrategyKind::kPlain) {
    return usage_error("--recover needs a preventing strategy: plain cannot learn whether an extend landed");
  }
  // Refused before the device is opened: nothing of it is touched.
  TPMSEC_ASSIGN_OR_RETURN(uint32_t index, parse_pcr_index(o.index));
  if (!pcr_resettable(index) && !o.force_pcr && is_device_spec(o.tpm)) {
    return usage_error(
        fmt::format("PCR {} of a real TPM cannot be reset: what a verifier sees would stay "
                    "changed until reboot. Use 16 or 23, or give --force-pcr",
                    index));
  }
  return a;
}

StreamOptions pcr_stream_options(const PcrOptions& o, const PcrTarget& t, bool batch) {
  StreamOptions options;
  options.pcr = t.index;
  options.bank = t.bank;
  options.checkpoint_every = o.checkpoint_every;
  options.one_shot = !batch;
  // A batch reads the PCR first only when asked (--recover); without it
  // a failure whose outcome is unknown stops the batch (strategy.h).
  options.recover = !batch || o.recover;
  options.read_back = o.read_back;
  return options;
}

// Ends the stream. --read-back ends it with an audited read, compared with
// the value read (audited) at open() extended by each digest (exit 3 on a
// mismatch): the value to print.
Result<std::optional<Bytes>> finish_stream(ExtendStream& stream, bool read_back) {
  if (!read_back) {
    TPMSEC_RETURN_IF_ERROR(stream.finish());
    return std::optional<Bytes>();
  }
  TPMSEC_ASSIGN_OR_RETURN(Bytes value, stream.read_back());
  return std::optional<Bytes>(std::move(value));
}

// What a batch extended: how many digests, and the bad line that stopped
// the reading (`input`; ok at the end of the input or on an interrupt).
struct BatchCount {
  size_t done = 0;
  Status input = ok_status();
};

// One stream for every line: the session (and the null key) are set up
// once, so each digest costs what the strategy's steady state does. The
// loop reads one line ahead, so that the last digest's extend ends the
// session (Last::kYes: no FlushContext after it). A bad line stops the
// batch: what came before it stays extended (and verified, for
// checkpoint), nothing after it is. A failed extend stops it too (without
// --recover, one whose outcome is unknown is not retried): the lines before
// it were extended.
Result<BatchCount> extend_lines(ExtendStream& stream, DigestLines& lines, const StopOnInterrupt& stop,
                                ProgressBar& bar) {
  BatchCount count;
  size_t first_line = 0, last_line = 0;  // the lines extended
  // The next digest and its line; nullopt at the end or on a bad line (in `count.input`).
  auto read = [&]() -> std::optional<std::pair<Bytes, size_t>> {
    Result<std::optional<Bytes>> next = lines.next();
    if (!next.ok()) {
      count.input = next.error();
      return std::nullopt;
    }
    if (!next->has_value()) return std::nullopt;
    return std::make_pair(std::move(**next), lines.line());
  };
  std::optional<std::pair<Bytes, size_t>> pending = read();
  while (pending && !stop.flag()->load()) {
    std::optional<std::pair<Bytes, size_t>> following = read();
    if (Status st = stream.extend(pending->first, following ? Last::kNo : Last::kYes); !st.ok()) {
      std::string before = count.done == 0           ? "nothing before it was extended"
                           : first_line == last_line ? fmt::format("line {} was extended", first_line)
                                                     : fmt::format("lines {}-{} were extended", first_line, last_line);
      return st.error().with_context(
          fmt::format("standard input line {} ({}, nothing after it)", pending->second, before));
    }
    if (count.done == 0) first_line = pending->second;
    last_line = pending->second;
    bar.update(++count.done, 0, "extended");
    pending = std::move(following);
  }
  return count;
}

// `pcr extend -`: every digest of standard input through `stream`, then the
// summary line; an interrupt stops the batch after the extend under way.
Result<std::optional<Bytes>> extend_batch(const PcrOptions& o, const PcrTarget& t, ProtectedTpm& protect,
                                          ExtendStream& stream, uint16_t bank, StrategyKind kind) {
  DigestLines lines(stdin, bank);
  StopOnInterrupt stop;
  ProgressBar bar(o.progress.enabled(), t.open.clock());
  TPMSEC_ASSIGN_OR_RETURN(BatchCount count, extend_lines(stream, lines, stop, bar));
  bar.finish();
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Bytes> read_back, finish_stream(stream, o.read_back));
  protect.keep(stream.factory());
  const bool interrupted = stop.flag()->load();
  const size_t done = count.done;
  std::string cost;
  if (!t.open.profile().empty() && done > 0) {
    cost = fmt::format(": {:.2f} ms of TPM time per extend on the emulated {}", t.open.emulated_ms() / done,
                       t.open.profile());
  }
  fmt::print(stderr, "tpmsec: extended {} digest{} into PCR {} ({}){}{}\n", done, done == 1 ? "" : "s", t.index,
             strategy_name(kind), cost, interrupted ? "; interrupted" : "");
  if (!count.input.ok()) {
    return Error(count.input.error().kind(),
                 fmt::format("{}; nothing after it was extended", count.input.error().message()));
  }
  if (interrupted) return runtime_error("interrupted");
  return read_back;
}

// `pcr extend`: one digest, or a batch, through one stream of the strategy
// the policy (or --strategy) chose for this TPM.
Status run_pcr_extend(const PcrOptions& o) {
  TPMSEC_ASSIGN_OR_RETURN(ExtendArgs args, check_pcr_extend_args(o));
  args.request.keep = true;
  TPMSEC_ASSIGN_OR_RETURN(PcrTarget t, open_target(o, std::move(args.request)));
  t.open.list_commands = o.strategy.verbose;
  StreamOptions options = pcr_stream_options(o, t, args.batch);
  ProtectedTpm* protect = t.open.protect.get();
  TPMSEC_ASSIGN_OR_RETURN(ExtendPlan plan, protect->plan_extends());
  const StrategyKind kind = plan.strategy;
  if (o.checkpoint_every_option->count() == 0) options.checkpoint_every = plan.tuning.checkpoint_every;
  if (o.recover && kind == StrategyKind::kPlain) {
    return usage_error("--recover needs a preventing strategy, and this TPM's policy chose plain");
  }
  // checkpoint (and a --recover batch) reads the PCR through an audit
  // session first, so it can verify the result and a failed extend is
  // never retried blindly; the others do not retry one (strategy.h).
  TPMSEC_ASSIGN_OR_RETURN(auto stream, protect->extend_stream(plan, options));
  std::optional<Bytes> read_back;
  if (!args.batch) {
    TPMSEC_RETURN_IF_ERROR(stream->extend(args.digest));
    TPMSEC_ASSIGN_OR_RETURN(read_back, finish_stream(*stream, o.read_back));
    protect->keep(stream->factory());
  } else {
    TPMSEC_ASSIGN_OR_RETURN(read_back, extend_batch(o, t, *protect, *stream, args.bank, kind));
  }
  if (read_back) fmt::print("{}\n", to_hex(*read_back));
  return ok_status();
}

// `pcr reset`, with TPM_RC_LOCALITY explained.
Status run_pcr_reset(const PcrOptions& reset) {
  ProtectRequest request;  // no session: nothing kept is used
  request.use_provisioned = false;
  TPMSEC_ASSIGN_OR_RETURN(PcrTarget t, open_target(reset, std::move(request)));
  Status st = pcr_reset(t.open.tpm(), t.index);
  if (!st.ok() && rc_base(st.error().tpm_rc()) == rc::kLocality) {
    // TPM_RC_LOCALITY: the PCR's reset attribute excludes the
    // locality tpmsec runs at (0). PC Client PTP: PCRs 0-15 reset
    // only at _TPM_Init (reboot), 17-22 from the DRTM's localities.
    return Error(st.error().kind(),
                 fmt::format("PCR {} cannot be reset from locality 0 (TPM_RC_LOCALITY): on PC Client TPMs "
                             "only PCRs 16 and 23 can; 0-15 reset only at reboot, 17-22 only from the "
                             "localities of a dynamic launch (DRTM)",
                             t.index),
                 st.error().tpm_rc());
  }
  return st;
}

void add_pcr_read(CLI::App* pcr, Action* action) {
  auto read = std::make_shared<PcrOptions>();
  read->protect = "none";
  CLI::App* rd = add_pcr_subcommand(pcr, "read", "Print a PCR's value as lowercase hex", read, true);
  rd->add_option("--protect", read->protect,
                 "none, or audit: the response is authenticated by an audit-attributed salted HMAC session "
                 "(Linux never protects reads)")
      ->check(CLI::IsMember({"none", "audit"}))
      ->capture_default_str();
  read->protection.add_to(rd, read->tpm);
  rd->callback([read, action] { *action = [read]() { return run_pcr_read(*read); }; });
}

void add_pcr_extend(CLI::App* pcr, Action* action) {
  auto extend = std::make_shared<PcrOptions>();
  CLI::App* ext = add_pcr_subcommand(
      pcr, "extend", "Extend a PCR with a digest, protected as the policy decides for this TPM (or --strategy)", extend,
      true, /*changes_state=*/true);
  ext->add_option("--protect", extend->protect,
                  "Shorthand kept from earlier versions: hmac = --strategy per-command (Linux 6.10), none = "
                  "--strategy plain (tpm.disable_pcr_integrity=1)")
      ->check(CLI::IsMember({"hmac", "none"}));
  extend->strategy.add_to(ext);
  extend->tpm.applies.policy = true;
  extend->protection.add_to(ext, extend->tpm);
  ext->add_option("DIGEST", extend->digest,
                  "Digest as hex, the bank's size (64 hex digits for sha256); - reads one digest per line from "
                  "standard input (blank lines and # comments skipped) and extends them all through one stream")
      ->required();
  extend->checkpoint_every_option = ext->add_option(
      "--checkpoint-every", extend->checkpoint_every,
      "checkpoint strategy, with DIGEST -: an audited read every N extends (0: only at the end; default: the "
      "policy's checkpoint_every for this TPM, else 100)");
  ext->add_flag("--recover", extend->recover,
                "With DIGEST - and a preventing strategy: read the PCR through an audit session first (one "
                "audited PCR_Read per batch, 22 ms on an SLB9670), so that an extend whose outcome is unknown is "
                "retried or counted as landed instead of stopping the batch (docs/strategies.md). Without it the "
                "batch costs Linux's one-shot sequence plus one command per further digest, and such a failure "
                "stops it, naming the line");
  extend->progress.add_to(ext);
  ext->add_flag("--read-back", extend->read_back,
                "Read the PCR afterwards through an audit session, check it is the value read (audited) before "
                "extended by the digest(s) given, and print it (a mismatch is exit 3)");
  ext->add_flag("--force-pcr", extend->force_pcr,
                "Allow PCRs 0-15 of a device: TPM (they cannot be reset: what a verifier sees stays changed)");
  ext->callback([extend, action] { *action = [extend]() { return run_pcr_extend(*extend); }; });
}

void add_pcr_reset(CLI::App* pcr, Action* action) {
  auto reset = std::make_shared<PcrOptions>();
  add_pcr_subcommand(pcr, "reset", "Reset a resettable PCR (16 or 23 on PC Client TPMs)", reset, false,
                     /*changes_state=*/true)
      ->callback([reset, action] { *action = [reset]() { return run_pcr_reset(*reset); }; });
}

}  // namespace

void register_pcr(CLI::App& app, Action* action) {
  CLI::App* pcr = app.add_subcommand("pcr", "Read, extend or reset a PCR");
  pcr->require_subcommand(1);
  add_pcr_read(pcr, action);
  add_pcr_extend(pcr, action);
  add_pcr_reset(pcr, action);
}

}  // namespace tpmsec::cli
