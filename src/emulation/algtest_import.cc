// Latency profiles from tpm2-algtest result directories (TPMScan): the runs
// of one chip, the outlier rule, and the profile put together from the
// steps beside this file (algtest_run.cc reads a directory, algtest_identity
// the identity and slots, algtest_rules the values, algtest_keep an earlier
// profile's).
#include "tpmsec/emulation/algtest_import.h"

#include <fmt/format.h>

#include <cmath>

#include "algtest_identity.h"
#include "algtest_keep.h"
#include "algtest_rules.h"
#include "algtest_values.h"
#include "tpmsec/order_statistics.h"

namespace tpmsec {

std::vector<bool> outlier_runs(const std::vector<double>& levels) {
  std::vector<bool> out(levels.size(), false);
  if (levels.size() < 3) return out;
  double med = median_of(levels);
  std::vector<double> dev;
  for (double v : levels) dev.push_back(std::fabs(v - med));
  double mad = 1.4826 * median_of(dev);
  for (size_t i = 0; i < levels.size(); ++i) {
    double d = std::fabs(levels[i] - med);
    out[i] = d > 3 * mad && d > 0.25 * med;
  }
  return out;
}

namespace {

using algtest::Builder;
using algtest::ReferenceRun;

// ---------------------------------------------------------------- the runs

// Runs of one chip only: every run's manufacturer is the first run's.
Status check_one_chip(const std::vector<AlgtestRun>& runs) {
  if (runs.empty()) return usage_error("no tpm2-algtest result directory given");
  for (const AlgtestRun& r : runs) {
    if (r.manufacturer != runs[0].manufacturer) {
      return usage_error(fmt::format("{} is manufacturer '{}' but {} is '{}': give runs of one chip", r.dir,
                                     r.manufacturer, runs[0].dir, runs[0].manufacturer));
    }
  }
  return ok_status();
}

// The runs the outlier rule keeps (on each run's GetRandom level), in
// order; `out` records their labels and, for the others, why they went.
std::vector<const AlgtestRun*> drop_outliers(const std::vector<AlgtestRun>& runs, AlgtestImport& out) {
  std::vector<double> levels;
  for (const AlgtestRun& r : runs) levels.push_back(r.ops.at("GetRandom").avg_ms);
  std::vector<bool> outlier = outlier_runs(levels);
  double level_median = median_of(levels);
  std::vector<const AlgtestRun*> kept;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (outlier[i]) {
      out.excluded.push_back(fmt::format("{}: GetRandom {:.2f} ms against the runs' median {:.2f} ms (outlier rule)",
                                         runs[i].label, levels[i], level_median));
    } else {
      kept.push_back(&runs[i]);
      out.used.push_back(runs[i].label);
    }
  }
  return kept;
}

// A profile's seed from its id: the same id always models the same jitter.
uint64_t seed_of(const std::string& id) {
  uint64_t seed = 0;
  for (char c : id) seed = seed * 131 + static_cast<unsigned char>(c);
  return seed % 1000000;
}

// What the profile is, for its note: how many runs from where, and how many were excluded.
std::string import_note(size_t kept_runs, const std::string& source, const AlgtestImport& out) {
  return fmt::format(
      "From {} tpm2-algtest run{} ({}) through the Linux driver, password sessions{}. M: measured operations; P: key "
      "creation for CreatePrimary; D: the rules A1-A6 of docs/latency-profiles.md (their error on the SLB9670 is the "
      "low/high); E: rules with no validation.",
      kept_runs, kept_runs == 1 ? "" : "s", source,
      out.excluded.empty() ? "" : fmt::format("; excluded by the outlier rule: {}", out.excluded.size()));
}

}  // namespace

Result<AlgtestImport> profile_from_algtest(const std::vector<AlgtestRun>& runs, const AlgtestImportOptions& options) {
  TPMSEC_RETURN_IF_ERROR(check_one_chip(runs));
  AlgtestImport out;
  std::vector<const AlgtestRun*> kept = drop_outliers(runs, out);
  ReferenceRun reference = algtest::reference_run(kept);
  std::string source = options.source.empty() ? "tpm2-algtest" : options.source;

  LatencyProfile& p = out.profile;
  p.id = options.id;
  algtest::set_identity(p, kept, reference, options, source);
  p.seed = seed_of(options.id);
  algtest::set_slots(p, kept, reference, source);
  algtest::set_rule_values(p, kept, source);
  p.note = import_note(kept.size(), source, out);
  if (options.keep) algtest::keep_earlier(p, *options.keep, Builder{source});
  return out;
}

}  // namespace tpmsec