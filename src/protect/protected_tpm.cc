// ProtectedTpm (protect.h): an open TPM, its anchor resolved once, and the
// decisions every protected command shares: the session factory, the
// strategy for extends and its tuning, what is kept between processes.
#include <fmt/format.h>

#include <cstdio>

#include "notice.h"
#include "tpmsec/held_handles.h"
#include "tpmsec/protect.h"
#include "tpmsec/tpm_config.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec {

void say(const Notice& notice, std::string_view line) {
  while (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (line.empty()) return;
  if (line.rfind("tpmsec: ", 0) == 0) line.remove_prefix(8);
  if (notice) {
    notice(line);
  } else {
    fmt::print(stderr, "tpmsec: {}\n", line);
  }
}

std::optional<SessionCache> session_cache_for(const Transport& base, bool keep, std::shared_ptr<HostState> host) {
  if (!keep || !base.outlives_process()) return std::nullopt;
  if (!host) host = host_state_of(ProtectRequest{});
  auto boot = host->boot_id();
  if (!boot.ok()) return std::nullopt;
  return SessionCache(std::move(host), tpm_id_of(base), *boot);
}

ProtectedTpm::~ProtectedTpm() = default;

Result<std::unique_ptr<ProtectedTpm>> ProtectedTpm::open(const ProtectRequest& request) {
  std::string spec = request.tpm;
  if (spec.empty()) {
    // The host's TPM; protection items the environment gives with it are
    // the front end's to apply (tpm_config.h).
    TPMSEC_ASSIGN_OR_RETURN(ChosenTpm chosen, chosen_tpm());
    spec = chosen.spec;
  }
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, open_bus_transport(spec));
  return open(request, std::move(transport));
}

Result<std::unique_ptr<ProtectedTpm>> ProtectedTpm::open(const ProtectRequest& request,
                                                         std::unique_ptr<Transport> transport, ProtectOptions options) {
  if (!transport) return usage_error("no TPM transport");
  std::unique_ptr<ProtectedTpm> p(new ProtectedTpm());
  p->request_ = request;
  p->request_.host = host_state_of(request);  // one for the cache and the anchor
  p->base_ = std::move(transport);
  p->cache_ = session_cache_for(*p->base_, request.keep, p->request_.host);
  p->tpm_ = std::make_unique<Tpm>(*p->base_);
  if (request.track_handles) p->track_handles();
  TPMSEC_ASSIGN_OR_RETURN(std::optional<TpmInfo> known, kept_info_of(p->cache_));
  if (known) {
    p->info_ = *known;
  } else {
    TPMSEC_ASSIGN_OR_RETURN(p->info_, read_tpm_info(*p->tpm_));
    if (p->cache_) {
      if (Status st = p->cache_->put_info(p->info_); !st.ok())
        p->say("warning: not kept for the next run: " + st.error().message());
    }
  }
  p->facts_ = options.facts ? std::move(*options.facts) : facts_of(p->info_, *p->base_);
  TPMSEC_RETURN_IF_ERROR(p->resolve(p->request_));
  return p;
}

Status ProtectedTpm::resolve(const ProtectRequest& request) {
  TPMSEC_ASSIGN_OR_RETURN(config_, resolve_protection(request, *base_, info_, SymDef::aes128_cfb()));
  if (served()) {
    if (request.verbose) {
      say(
          fmt::format("{} is a tpmsec server: it puts its salted, anchored session on every command; this process "
                      "starts none",
                      base_->describe()));
    }
    describe_anchor();
    return ok_status();
  }
  TPMSEC_RETURN_IF_ERROR(stand());
  if (cache_ && !config_.bind && !config_.salt_key) {
    TPMSEC_ASSIGN_OR_RETURN(config_.kept_null_key, cache_->null_key(config_.salt ? *config_.salt : choose_salt(info_)));
  }
  return ok_status();
}

void ProtectedTpm::track_handles() {
  if (base_->in_process() || !base_->outlives_process()) return;
  auto boot = request_.host->boot_id();
  if (!boot.ok()) {
    say("warning: handles are not recorded: " + boot.error().message());
    return;
  }
  TpmId id = tpm_id_of(*base_);
  auto stale = flush_stale_handles(*tpm_, *request_.host, id, *boot);
  if (!stale.ok()) {
    say("warning: what an ended process left on the TPM is not flushed: " + stale.error().message());
  } else if (!stale->flushed.empty()) {
    say(fmt::format("flushed what a process that ended without flushing left on the TPM: 0x{:08x}",
                    fmt::join(stale->flushed, ", 0x")));
  }
  if (base_->private_handles()) return;
  Notice notice = request_.notice;
  Status st = track_held_handles(*tpm_, request_.host, std::move(id), *boot,
                                 [notice](std::string_view line) { tpmsec::say(notice, line); });
  if (!st.ok()) say("warning: handles are not recorded: " + st.error().message());
}

void ProtectedTpm::say(std::string_view line) const { tpmsec::say(request_.notice, line); }

ProtectionConfig ProtectedTpm::protection(SymDef symmetric) const {
  ProtectionConfig c = config_;
  c.symmetric = symmetric;
  return c;
}

bool ProtectedTpm::anchored() const { return has_trust_anchor(config_) || base_->in_process() || served(); }

bool ProtectedTpm::served() const { return base_->spec().kind == TpmKind::kServe; }

namespace {

Error served_error(const Transport& base) {
  return usage_error(
      fmt::format("{} is a tpmsec server, which puts its own session on every command: this process "
                  "starts none",
                  base.describe()));
}

}  // namespace

Result<std::unique_ptr<SessionFactory>> ProtectedTpm::factory(SymDef symmetric) {
  if (served()) return served_error(*base_);
  return SessionFactory::create(*tpm_, protection(symmetric), &info_);
}

ProtectionConfig ProtectedTpm::tuned(const SessionTuning& tuning, SymDef symmetric) const {
  ProtectionConfig c = protection(symmetric);
  c.null_key_load = tuning.null_key;
  return c;
}

Result<std::unique_ptr<SessionFactory>> ProtectedTpm::factory(const SessionTuning& tuning, SymDef symmetric) {
  if (served()) return served_error(*base_);
  return SessionFactory::create(*tpm_, tuned(tuning, symmetric), &info_);
}

namespace {

void print_tuning(const Notice& notice, const Policy& p, const PolicyRule& rule, const SessionTuning& t) {
  say(notice, fmt::format("sessions on this TPM (policy {} rule '{}'{}): null key {}, checkpoint every {}", p.origin,
                          rule.name, rule.null_key || rule.checkpoint_every ? "" : ", defaults",
                          null_key_load_name(t.null_key), t.checkpoint_every));
}

}  // namespace

Result<SessionTuning> ProtectedTpm::session_tuning() {
  Result<Policy> p = load_command_policy(request_.policy);
  if (!p.ok()) {
    if (!request_.policy.empty()) return p.error();
    return SessionTuning{};
  }
  PolicyDecision d = decide(*p, facts_);
  if (request_.verbose && d.rule) print_tuning(request_.notice, *p, *d.rule, d.tuning);
  return d.tuning;
}

Result<ProtectedTpm::Sessions> ProtectedTpm::open_sessions() {
  Sessions out;
  TPMSEC_ASSIGN_OR_RETURN(out.tuning, session_tuning());
  TPMSEC_ASSIGN_OR_RETURN(out.factory, factory(out.tuning));
  keep(out.factory.get());
  return out;
}

Status ProtectedTpm::check_named_anchor() {
  if (std::holds_alternative<anchor::Automatic>(request_.anchor) ||
      std::holds_alternative<anchor::Unsalted>(request_.anchor)) {
    return ok_status();
  }
  return status_of(factory());
}

Result<ExtendPlan> ProtectedTpm::plan_extends() {
  ExtendPlan plan;
  if (served()) {
    // The server's session protects each extend: a strategy of this
    // process's own would only put a second session on it.
    if (request_.strategy && *request_.strategy != StrategyKind::kPlain) {
      return usage_error(
          fmt::format("{} is a tpmsec server, which puts its own session on every extend: "
                      "--strategy {} does not apply (the server's policy decides)",
                      base_->describe(), strategy_name(*request_.strategy)));
    }
    plan.strategy = StrategyKind::kPlain;
    return plan;
  }
  if (request_.strategy) {
    // The strategy is the operator's; how its sessions run on this chip is
    // still the policy's.
    plan.strategy = *request_.strategy;
    TPMSEC_ASSIGN_OR_RETURN(plan.tuning, session_tuning());
    say(weak_strategy_notice(plan.strategy, "operator's --strategy"));
    return plan;
  }
  TPMSEC_ASSIGN_OR_RETURN(Policy p, load_command_policy(request_.policy));
  Result<PolicyDecision> decided = decide_on_tpm(p, facts_, *tpm_, config_, &info_);
  if (!decided.ok()) {
    // An audited identity read that contradicts the kept plain one: keep
    // nothing of this boot's reads, so the next run reads afresh.
    if (decided.error().reason() == ErrorReason::kIdentityForged) forget_kept();
    return decided.error();
  }
  const PolicyDecision& d = *decided;
  if (!d.rule) return usage_error(fmt::format("{}: no rule matches this TPM", p.origin));
  plan.strategy = d.extend;
  plan.tuning = d.tuning;
  if (request_.verbose) {
    say(fmt::format("policy {} rule '{}' (line {}): {} for extends — {}", p.origin, d.rule->name, d.rule->line,
                    strategy_name(d.lifted_extend.value_or(d.extend)), d.rule->reason));
    say(fmt::format("the decision rests on: {}", fmt::join(d.rests_on, "; ")));
    print_tuning(request_.notice, p, *d.rule, d.tuning);
  }
  if (d.lifted_extend) {
    say(fmt::format("policy {} rule '{}' chose {} for extends, but {}: using {} ({})", p.origin, d.rule->name,
                    strategy_name(*d.lifted_extend), d.floor_reason, strategy_name(d.extend), d.fallback_reason));
  }
  say(weak_strategy_notice(d.extend, fmt::format("policy {} rule '{}'", p.origin, d.rule->name)));
  return plan;
}

Result<std::unique_ptr<PolicyView>> ProtectedTpm::policy_view(const MeasuredFacts* measured) {
  auto view = std::make_unique<PolicyView>();
  TPMSEC_ASSIGN_OR_RETURN(view->policy, load_command_policy(request_.policy));
  view->facts = facts_;
  // An anchor named is used: the identity is read through a session salted
  // to it, not only when the decision needs it.
  const bool named = !std::holds_alternative<anchor::Automatic>(request_.anchor) &&
                     !std::holds_alternative<anchor::Unsalted>(request_.anchor);
  if (named && view->facts.identity_origin == FactOrigin::kUnauthenticated) {
    TPMSEC_RETURN_IF_ERROR(confirm_identity(view->facts, *tpm_, protection(), &info_));
  }
  if (measured) {
    view->facts.measured = measured->properties;
    view->facts.measured_source = measured->source;
    view->facts.measured_origin = FactOrigin::kUnauthenticated;
  }
  TPMSEC_ASSIGN_OR_RETURN(view->decision, decide_on_tpm(view->policy, view->facts, *tpm_, protection(), &info_));
  return view;
}

TpmId ProtectedTpm::id() const { return tpm_id_of(*base_); }

Result<std::unique_ptr<ExtendStream>> ProtectedTpm::extend_stream(const ExtendPlan& plan, StreamOptions options) {
  options.protection = tuned(plan.tuning);
  if (plan.strategy == StrategyKind::kPlain) {
    // No session: an anchor the request named is checked anyway, never ignored.
    TPMSEC_RETURN_IF_ERROR(check_named_anchor());
  }
  return ExtendStream::open(*tpm_, plan.strategy, options, &info_);
}

void ProtectedTpm::keep(const SessionFactory* factory) {
  if (!cache_ || !factory || !factory->null_key()) return;
  const NullKey& key = *factory->null_key();
  // A key created afresh for each session (NullKeyLoad::kRecreate) has no
  // context to keep.
  if (key.load_mode() == NullKeyLoad::kRecreate) return;
  // A kept key the TPM refused: it was reset or is another TPM, so what was
  // kept of its capabilities is read afresh next time too.
  if (key.changed()) (void)cache_->drop_info();
  auto kept = cache_->null_key(key.kind());
  if (!kept.ok()) {
    say("warning: not kept for the next run: " + kept.error().message());
    return;
  }
  if (*kept && (*kept)->name == key.name() && (*kept)->context == key.snapshot().context) return;
  if (Status st = cache_->put_null_key(key.snapshot()); !st.ok()) {
    say("warning: not kept for the next run: " + st.error().message());
  }
}

void ProtectedTpm::keep_if_changed(const SessionFactory* factory) {
  if (kept_changed_key_ || !cache_ || !factory || !factory->null_key() || !factory->null_key()->changed()) return;
  kept_changed_key_ = true;
  keep(factory);
}

void ProtectedTpm::forget_kept() {
  if (cache_) (void)cache_->forget();
}

Result<std::optional<uint64_t>> ProtectedTpm::commands_last_run() {
  // What is kept per program is kept only with the rest (a cache); which
  // program this is is read here, for the one front end that asks.
  if (!cache_) return std::optional<uint64_t>();
  if (!program_) {
    auto program = request_.host->running_program();
    if (!program.ok()) return std::optional<uint64_t>();
    program_ = std::move(*program);
  }
  return cache_->command_count(*program_);
}

void ProtectedTpm::commands_kept(uint64_t count) {
  if (!cache_ || !program_) return;
  if (Status st = cache_->put_command_count(*program_, count); !st.ok()) {
    say("warning: not kept for the next run: " + st.error().message());
  }
}

}  // namespace tpmsec
