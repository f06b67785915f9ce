// Runs `tpmsec bench`: primitives one command at a time, then each strategy
// over a stream of extends.
#include <fmt/format.h>

#include <cmath>

#include <ctime>

#include "tpmsec/crypto.h"
#include "tpmsec/emulation/tpm_info_json.h"
#include "tpmsec/measure/bench.h"
#include "tpmsec/pcr.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec {
namespace {

class Runner {
 public:
  Runner(Tpm& tpm, TraceLog& log, const Clock& clock, const BenchOptions& options)
      : tpm_(tpm), log_(log), clock_(clock), options_(options) {}

  bool stopped() const { return options_.stop && options_.stop->load(); }

  // Times `op` on the bench clock and collects the TPM commands it sent.
  template <class Op>
  Result<Sample> timed(Op&& op) {
    Sample s;
    size_t mark = log_.size();
    s.start_ns = clock_.now_ns();
    Status st = op();
    int64_t end = clock_.now_ns();
    if (!st.ok()) return st.error();
    s.commands = log_.since(mark);
    s.total_ms = static_cast<double>(end - s.start_ns) / 1e6;
    for (const auto& c : s.commands) s.tpm_ms += static_cast<double>(c.duration_ns) / 1e6;
    s.host_ms = std::max(0.0, s.total_ms - s.tpm_ms);
    return s;
  }

  void progress(const std::string& what) {
    ++done_;
    if (options_.progress) options_.progress(done_, total_, what);
  }
  void set_total(size_t total) { total_ = total; }

  Bytes digest_for(uint64_t i) {
    uint8_t counter[8];
    for (int b = 0; b < 8; ++b) counter[b] = static_cast<uint8_t>(i >> (56 - 8 * b));
    auto d = crypto::hash(options_.bank, {as_bytes("tpmsec bench"), ByteView(counter, 8)});
    return d.ok() ? *d : Bytes(32, 0);
  }

  Tpm& tpm_;
  TraceLog& log_;
  const Clock& clock_;
  const BenchOptions& options_;
  size_t done_ = 0, total_ = 0;
  uint64_t digest_counter_ = 0;
};

void finish_primitive(PrimitiveResult& p) {
  std::vector<double> tpm, host;
  for (const auto& s : p.samples) {
    tpm.push_back(s.tpm_ms);
    host.push_back(s.host_ms * 1000.0);
  }
  p.tpm_ms = summarize(tpm);
  p.host_us = summarize(host);
}

// Measures one TPM command per iteration. `setup` and `teardown` are untimed;
// `op` must send exactly the command being measured.
Status measure(Runner& run, std::vector<PrimitiveResult>& out, const std::string& name,
               const std::function<Status()>& setup, const std::function<Status()>& op,
               const std::function<Status()>& teardown) {
  PrimitiveResult p{name, {}, {}, {}};
  for (int i = 0; i < run.options_.iterations && !run.stopped(); ++i) {
    if (setup) TPMSEC_RETURN_IF_ERROR(setup());
    auto s = run.timed(op);
    if (!s.ok()) return s.error().with_context(name);
    p.samples.push_back(std::move(*s));
    if (teardown) TPMSEC_RETURN_IF_ERROR(teardown());
  }
  finish_primitive(p);
  out.push_back(std::move(p));
  run.progress(name);
  return ok_status();
}

// PCR_Extend with a password and with an HMAC session, PCR_Read plain and
// audited, GetRandom, and the session's own ContextSave and ContextLoad.
Status measure_session_primitives(Runner& run, SessionFactory& factory, std::vector<PrimitiveResult>& out) {
  Tpm& tpm = run.tpm_;
  const auto& o = run.options_;
  Bytes digest = run.digest_for(0);
  TPMSEC_RETURN_IF_ERROR(measure(
      run, out, "PCR_Extend (password)", nullptr, [&] { return pcr_extend(tpm, o.bank, o.pcr, digest); }, nullptr));
  TPMSEC_ASSIGN_OR_RETURN(auto session, factory.start(attr::kContinueSession));
  TPMSEC_RETURN_IF_ERROR(measure(
      run, out, "PCR_Extend (HMAC session)", nullptr,
      [&] {
        return pcr_extend(tpm, o.bank, o.pcr, digest, Auth{session.get(), {}});
      },
      nullptr));
  TPMSEC_RETURN_IF_ERROR(measure(
      run, out, "PCR_Read", nullptr, [&] { return status_of(pcr_read(tpm, o.bank, o.pcr)); }, nullptr));
  session->set_attributes(attr::kAudit | attr::kContinueSession);
  TPMSEC_RETURN_IF_ERROR(measure(
      run, out, "PCR_Read (audit session)", nullptr,
      [&]() -> Status {
        Auth audit{session.get(), {}};
        return status_of(pcr_read(tpm, o.bank, o.pcr, std::span<const Auth>(&audit, 1)));
      },
      nullptr));
  TPMSEC_RETURN_IF_ERROR(measure(
      run, out, "GetRandom(32)", nullptr, [&] { return status_of(tpm.run(cmd::GetRandom{32})); }, nullptr));
  // Session context save/load: the numbers the seed thread lacked.
  Context ctx;
  auto save = [&]() -> Status {
    auto c = session->save(tpm);
    if (!c.ok()) return c.error();
    ctx = std::move(*c);
    return ok_status();
  };
  auto load = [&] { return session->load(tpm, ctx); };
  TPMSEC_RETURN_IF_ERROR(measure(run, out, "ContextSave (session)", nullptr, save, load));
  TPMSEC_RETURN_IF_ERROR(measure(run, out, "ContextLoad (session)", save, load, nullptr));
  return session->flush();
}

// The one key object the key measurements load, create and flush.
class KeySlot {
 public:
  explicit KeySlot(Tpm& tpm) : tpm_(tpm) {}

  // A step that loads `key` into the slot.
  std::function<Status()> loader(NullKey& key) {
    return [this, &key]() -> Status {
      auto h = key.load(tpm_);
      if (!h.ok()) return h.error();
      loaded_ = std::move(*h);
      return ok_status();
    };
  }
  std::function<Status()> flusher() {
    return [this]() -> Status {
      Status st = loaded_ ? loaded_->flush() : ok_status();
      loaded_.reset();
      return st;
    };
  }
  void hold(ScopedHandle handle) { loaded_ = std::move(handle); }
  uint32_t handle() const { return loaded_->get(); }

 private:
  Tpm& tpm_;
  std::optional<ScopedHandle> loaded_;
};

// The null key's ContextLoad and ContextSave, and FlushContext.
Status measure_key_contexts(Runner& run, NullKey& key, KeySlot& slot, std::vector<PrimitiveResult>& out) {
  Tpm& tpm = run.tpm_;
  auto load_key = slot.loader(key);
  auto flush_key = slot.flusher();
  TPMSEC_RETURN_IF_ERROR(measure(run, out, "ContextLoad (null key)", nullptr, load_key, flush_key));
  TPMSEC_RETURN_IF_ERROR(measure(
      run, out, "ContextSave (null key)", load_key,
      [&] { return status_of(tpm.run(cmd::ContextSave{key.named(slot.handle())})); }, flush_key));
  return measure(run, out, "FlushContext", load_key, flush_key, nullptr);
}

// StartAuthSession unsalted, salted to the ECC null key, and (a second null
// key: RSA-2048 primaries are slow to create, once) salted to an RSA one;
// each session is flushed untimed. Between them, CreatePrimary of the ECC
// null key.
Status measure_session_starts(Runner& run, NullKey& key, KeySlot& slot, std::vector<PrimitiveResult>& out) {
  Tpm& tpm = run.tpm_;
  uint32_t last_session = 0;
  auto flush_key = slot.flusher();
  auto start_with = [&](NullKey* salt_key) -> std::function<Status()> {
    return [&, salt_key]() -> Status {
      SessionOptions so;
      NamedHandle handle;
      if (salt_key) {
        handle = salt_key->named(slot.handle());
        so.tpm_key = &handle;
        so.tpm_key_public = &salt_key->public_area();
      }
      auto s = HmacSession::start(tpm, so);
      if (!s.ok()) return s.error();
      s->get()->abandon();  // flushed untimed below
      last_session = (*s)->handle();
      return ok_status();
    };
  };
  auto flush_session = [&] { return status_of(tpm.run(cmd::FlushContext{last_session})); };
  auto flush_both = [&]() -> Status {
    TPMSEC_RETURN_IF_ERROR(flush_session());
    return flush_key();
  };
  TPMSEC_RETURN_IF_ERROR(measure(run, out, "StartAuthSession (unsalted)", nullptr, start_with(nullptr), flush_session));
  TPMSEC_RETURN_IF_ERROR(
      measure(run, out, "StartAuthSession (ECC salt)", slot.loader(key), start_with(&key), flush_both));

  TPMSEC_RETURN_IF_ERROR(measure(
      run, out, "CreatePrimary (null key, ECC)", nullptr,
      [&]() -> Status {
        cmd::CreatePrimary c;
        c.primary_handle = NamedHandle::of(rh::kNull);
        c.in_public.public_area = null_key_template(SaltKind::kEcc);
        auto r = tpm.run(c, {Auth::password()});
        if (!r.ok()) return r.error();
        slot.hold(ScopedHandle(tpm, r->object_handle));
        return ok_status();
      },
      flush_key));

  auto rsa = NullKey::create(tpm, SaltKind::kRsa);
  if (rsa.ok()) {
    TPMSEC_RETURN_IF_ERROR(
        measure(run, out, "StartAuthSession (RSA salt)", slot.loader(*rsa), start_with(&*rsa), flush_both));
  }
  return ok_status();
}

Status run_primitives(Runner& run, SessionFactory& factory, std::vector<PrimitiveResult>& out) {
  NullKey key = *factory.null_key();  // a copy: loading may refresh its context
  TPMSEC_RETURN_IF_ERROR(measure_session_primitives(run, factory, out));
  KeySlot slot(run.tpm_);
  TPMSEC_RETURN_IF_ERROR(measure_key_contexts(run, key, slot, out));
  return measure_session_starts(run, key, slot, out);
}

Status run_strategy(Runner& run, StrategyKind kind, const TpmInfo& info, StrategyResult& out) {
  const auto& o = run.options_;
  out.kind = kind;
  // Every strategy starts from a reset PCR.
  TPMSEC_RETURN_IF_ERROR(pcr_reset(run.tpm_, o.pcr));
  StreamOptions so;
  so.pcr = o.pcr;
  so.bank = o.bank;
  so.checkpoint_every = o.checkpoint_every;
  so.protection = o.protection;
  // The first extend's session set-up is reported with it, not in the opening.
  so.read_with_first_session = false;
  std::unique_ptr<ExtendStream> stream;
  TPMSEC_ASSIGN_OR_RETURN(out.open, run.timed([&]() -> Status {
    auto s = ExtendStream::open(run.tpm_, kind, so, &info);
    if (!s.ok()) return s.error();
    stream = std::move(*s);
    return ok_status();
  }));
  for (int i = 0; i < o.iterations && !run.stopped(); ++i) {
    Bytes d = run.digest_for(++run.digest_counter_);
    auto s = run.timed([&] { return stream->extend(d); });
    if (!s.ok()) return s.error().with_context(std::string(strategy_name(kind)));
    out.extends.push_back(std::move(*s));
    // Every extend: the progress bar decides how often to draw (by time).
    run.progress(std::string(strategy_name(kind)));
  }
  TPMSEC_ASSIGN_OR_RETURN(out.finish, run.timed([&] { return stream->finish(); }));
  stream.reset();
  std::vector<double> steady, host;
  double commands = 0;
  for (size_t i = 1; i < out.extends.size(); ++i) {
    steady.push_back(out.extends[i].total_ms);
    host.push_back(out.extends[i].host_ms * 1000.0);
    commands += static_cast<double>(out.extends[i].commands.size());
  }
  out.per_extend_ms = summarize(steady);
  out.host_us = summarize(host);
  if (!out.extends.empty()) {
    out.first_extend_ms = out.extends[0].total_ms;
    out.first_extend_commands = out.extends[0].commands.size();
  }
  out.tpm_commands_per_extend = steady.empty() ? 0 : commands / static_cast<double>(steady.size());
  return ok_status();
}

}  // namespace

Result<BenchResult> run_bench(Tpm& tpm, TraceLog& log, const Clock& clock, const TpmInfo& info,
                              const BenchOptions& options) {
  BenchResult result;
  result.options = options;
  if (result.options.strategies.empty()) result.options.strategies = all_strategies();
  // The plain baseline is always measured: every ratio is to it.
  bool has_plain = false;
  for (auto k : result.options.strategies) has_plain |= k == StrategyKind::kPlain;
  if (!has_plain) result.options.strategies.push_back(StrategyKind::kPlain);
  if (result.options.iterations < 2)
    return usage_error("--iterations must be at least 2 (first extend + steady state)");
  result.tpm = to_json(info);
  result.tpm["emulated"] = false;
  result.transport = tpm.transport().describe();
  result.virtual_clock = clock.is_virtual();
  result.date = utc_timestamp();
  result.version = TPMSEC_VERSION;

  Runner run(tpm, log, clock, result.options);
  // Each strategy reports every extend.
  const size_t per_strategy = static_cast<size_t>(result.options.iterations);
  run.set_total((result.options.primitives ? 14 : 0) + result.options.strategies.size() * per_strategy);

  Status status;
  if (result.options.primitives) {
    auto factory = SessionFactory::create(tpm, result.options.protection, &info);
    status = factory.ok() ? run_primitives(run, **factory, result.primitives) : Status(factory.error());
  }
  for (StrategyKind kind : result.options.strategies) {
    if (!status.ok() || run.stopped()) break;
    StrategyResult s;
    status = run_strategy(run, kind, info, s);
    result.strategies.push_back(std::move(s));
  }
  // Leave the PCR as we found it (reset), whatever happened.
  Status reset = pcr_reset(tpm, result.options.pcr);
  if (!status.ok()) return status.error();
  TPMSEC_RETURN_IF_ERROR(reset);
  result.interrupted = run.stopped();

  rate_strategies(result);
  return result;
}

StrategyCosts strategy_costs(const BenchResult& r) {
  StrategyCosts costs;
  for (const auto& s : r.strategies) {
    if (s.per_extend_ms.n == 0) continue;
    // Checkpoint's cost is amortized over its period: the mean.
    costs.per_extend_ms[s.kind] = s.kind == StrategyKind::kCheckpoint ? s.per_extend_ms.mean : s.per_extend_ms.median;
    // The standard error of the median, roughly: the spread to p90 over sqrt(n).
    if (s.per_extend_ms.n > 1) {
      costs.noise_ms[s.kind] =
          (s.per_extend_ms.p90 - s.per_extend_ms.median) / std::sqrt(static_cast<double>(s.per_extend_ms.n));
    }
  }
  return costs;
}

void rate_strategies(BenchResult& r) {
  double plain_median = 0;
  for (const auto& s : r.strategies) {
    if (s.kind == StrategyKind::kPlain) plain_median = s.per_extend_ms.median;
  }
  for (auto& s : r.strategies) {
    double cost = s.kind == StrategyKind::kCheckpoint ? s.per_extend_ms.mean : s.per_extend_ms.median;
    s.ratio_to_plain = plain_median > 0 ? cost / plain_median : 0;
  }
  // A run cut short decides nothing: a strategy could win only because a
  // better one was never measured, or on a handful of samples.
  if (r.interrupted) {
    r.recommendation =
        "recommendation: none, the run was interrupted: strategies it did not reach are missing and the others "
        "rest on fewer samples; run it to the end to get one";
    return;
  }
  // The one decision function (strategy_choice.h), as policy calibrate uses it.
  StrategyCosts costs = strategy_costs(r);
  r.recommendation = recommendation_line(choose_strategy(costs, r.options.budget_ms, r.options.floor), costs);
}

std::string utc_timestamp() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace tpmsec
