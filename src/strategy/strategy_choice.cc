#include "tpmsec/strategy_choice.h"

#include <fmt/format.h>

#include <algorithm>

namespace tpmsec {
namespace {

// Prevention strategies, then detection, then none.
int protection_rank(StrategyKind k) {
  if (prevents(k)) return 0;
  return k == StrategyKind::kCheckpoint ? 1 : 2;
}
int floor_rank(ProtectionFloor f) {
  switch (f) {
    case ProtectionFloor::kPrevention:
      return 0;
    case ProtectionFloor::kDetection:
      return 1;
    case ProtectionFloor::kNone:
      return 2;
  }
  return 0;
}

// Every measured strategy, in order of protection, then cost.
std::vector<Calibration::Candidate> ranked_candidates(const StrategyCosts& costs, double budget_ms,
                                                      ProtectionFloor floor) {
  std::vector<Calibration::Candidate> candidates;
  for (const auto& [kind, ms] : costs.per_extend_ms) {
    candidates.push_back({kind, ms, ms <= budget_ms, protection_rank(kind) <= floor_rank(floor)});
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    if (protection_rank(a.kind) != protection_rank(b.kind)) return protection_rank(a.kind) < protection_rank(b.kind);
    return a.ms < b.ms;
  });
  return candidates;
}

// The candidates the choice rests on (pointers into Calibration::candidates).
struct Picks {
  const Calibration::Candidate* pick = nullptr;       // the choice; none when nothing allowed was measured
  const Calibration::Candidate* cheapest = nullptr;   // allowed
  const Calibration::Candidate* below = nullptr;      // the most protective one the floor refused that fits
  const Calibration::Candidate* tied_with = nullptr;  // cheaper, but within the noise of the pick
  bool fits = false;                                  // the pick fits the budget
};

// The most protective allowed candidate that fits; when none fits, the
// cheapest allowed one, or a more protective one within the measured noise
// of it.
Picks pick_candidate(const std::vector<Calibration::Candidate>& candidates, const StrategyCosts& costs) {
  Picks p;
  for (const auto& cand : candidates) {
    if (!cand.allowed) {
      if (cand.fits && !p.below) p.below = &cand;
      continue;
    }
    if (cand.fits && !p.pick) p.pick = &cand;
    if (!p.cheapest || cand.ms < p.cheapest->ms) p.cheapest = &cand;
  }
  p.fits = p.pick != nullptr;
  if (!p.pick && p.cheapest) {
    // Ties within the measured noise go to the more protective strategy
    // (candidates are in order of protection, then cost).
    auto noise = [&](StrategyKind k) {
      auto it = costs.noise_ms.find(k);
      return it == costs.noise_ms.end() ? 0.0 : it->second;
    };
    for (const auto& cand : candidates) {
      const double tie = std::max(noise(cand.kind) + noise(p.cheapest->kind), 0.01 * p.cheapest->ms);
      if (cand.allowed && cand.ms <= p.cheapest->ms + tie) {
        p.pick = &cand;
        break;
      }
    }
    if (p.pick != p.cheapest) p.tied_with = p.cheapest;
  }
  return p;
}

// Why `c.extend` was chosen, in one line.
std::string choice_reason(const Calibration& c, const StrategyCosts& costs, const Picks& p) {
  auto ms_of = [&](StrategyKind k) {
    auto it = costs.per_extend_ms.find(k);
    return it == costs.per_extend_ms.end() ? -1.0 : it->second;
  };
  const Calibration::Candidate* best_prevention = nullptr;
  for (const auto& cand : c.candidates) {
    if (prevents(cand.kind)) {
      best_prevention = &cand;
      break;
    }
  }
  const double budget_ms = c.budget_ms;
  const ProtectionFloor floor = c.floor;
  double chosen = p.pick ? p.pick->ms : 0;
  std::string reason;
  if (!p.pick) {
    reason = floor == ProtectionFloor::kPrevention ? "no prevention strategy was measured: resident, the default"
                                                   : "nothing was measured";
  } else if (!c.fits && floor == ProtectionFloor::kPrevention) {
    reason = fmt::format(
        "prevention costs {:.2f} ms per extend at best ({}), over the {:.1f} ms budget; the "
        "prevention floor keeps it",
        chosen, strategy_name(c.extend), budget_ms);
  } else if (!c.fits) {
    reason = fmt::format("no strategy fits {:.1f} ms per extend: even {} costs {:.2f} ms; {} is the cheapest{}",
                         budget_ms, strategy_name(c.extend), chosen, strategy_name(c.extend),
                         floor == ProtectionFloor::kDetection ? " at or above detection" : "");
  } else if (prevents(c.extend)) {
    reason = fmt::format("{} prevents bus tampering at {:.2f} ms per extend (budget {:.1f} ms; plain {:.2f} ms)",
                         strategy_name(c.extend), chosen, budget_ms, ms_of(StrategyKind::kPlain));
  } else {
    reason = best_prevention ? fmt::format(
                                   "prevention costs {:.2f} ms per extend at best, over the {:.1f} ms budget; {} "
                                   "costs {:.2f} ms",
                                   best_prevention->ms, budget_ms, strategy_name(c.extend), chosen)
                             : fmt::format("{} costs {:.2f} ms per extend (budget {:.1f} ms)", strategy_name(c.extend),
                                           chosen, budget_ms);
  }
  if (p.tied_with) {
    reason += fmt::format(
        "; {} costs {:.3f} ms less, within the measured noise: a tie, which the more protective "
        "strategy wins",
        strategy_name(p.tied_with->kind), p.pick->ms - p.tied_with->ms);
  }
  if (!c.floor_note.empty()) reason += "; " + c.floor_note;
  return reason;
}

}  // namespace

std::string_view floor_flag(ProtectionFloor floor) {
  switch (floor) {
    case ProtectionFloor::kPrevention:
      return "";
    case ProtectionFloor::kDetection:
      return "--allow-detection";
    case ProtectionFloor::kNone:
      return "--allow-plain";
  }
  return "";
}

Calibration choose_strategy(const StrategyCosts& costs, double budget_ms, ProtectionFloor floor) {
  Calibration c;
  c.budget_ms = budget_ms;
  c.floor = floor;
  c.candidates = ranked_candidates(costs, budget_ms, floor);
  const Picks p = pick_candidate(c.candidates, costs);
  c.fits = p.fits;
  if (p.pick) c.extend = p.pick->kind;
  // Other protected commands: the cheapest prevention strategy.
  for (const auto& cand : c.candidates) {
    if (prevents(cand.kind)) {
      c.other = cand.kind;
      break;
    }
  }
  if (!c.fits && p.below) {
    bool detects = p.below->kind == StrategyKind::kCheckpoint;
    c.floor_note = fmt::format("{} would fit at {:.2f} ms but {} ({})", strategy_name(p.below->kind), p.below->ms,
                               detects ? "only detects" : "protects nothing",
                               floor_flag(detects ? ProtectionFloor::kDetection : ProtectionFloor::kNone));
  }
  c.reason = choice_reason(c, costs, p);
  return c;
}

std::string recommendation_line(const Calibration& c, const StrategyCosts& costs) {
  const bool measured = costs.per_extend_ms.count(c.extend) > 0;
  if (!measured) {
    return fmt::format(
        "recommendation: none of the measured strategies is allowed by the {} floor: measure "
        "resident, saved-context or per-command{}",
        c.floor == ProtectionFloor::kPrevention ? "prevention" : "protection",
        c.floor == ProtectionFloor::kPrevention ? " (--allow-detection would allow checkpoint)" : "");
  }
  return fmt::format("recommendation: {} ({}) — {}", strategy_name(c.extend), strategy_protection(c.extend), c.reason);
}

}  // namespace tpmsec
