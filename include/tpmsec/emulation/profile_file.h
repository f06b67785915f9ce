// Latency profile files (docs/latency-profiles.md): where the shipped ones
// live, reading and validating one (strictly: a typo in a shipped profile
// must fail the tests, not be modelled as zero), and writing one back.
#ifndef TPMSEC_EMULATION_PROFILE_FILE_H_
#define TPMSEC_EMULATION_PROFILE_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpmsec/emulation/latency_profile.h"
#include "tpmsec/result.h"

namespace tpmsec {

// The directory shipped profiles live in: data_dir()/profiles.
std::string profiles_dir();

// The file a profile argument names: a bare name (letters, digits, '.', '_',
// '-', not ending in ".json") is profiles_dir()/NAME.json; anything else is
// a path.
std::string profile_path(const std::string& name_or_path);

// Loads and validates a profile. Errors name the file and the problem:
// kUsage for an unknown profile name, kRuntime for an unreadable file,
// kParse for bad JSON ("line L, column C"), a missing key, a negative
// latency, an unknown tag, a wrong type or an unknown key (keys starting
// with '_' are comments and ignored).
Result<LatencyProfile> load_profile(const std::string& name_or_path);

// The same validation on JSON text; `origin` prefixes every error.
Result<LatencyProfile> parse_profile(std::string_view text, const std::string& origin);
Result<LatencyProfile> profile_from_json(const nlohmann::json& json, const std::string& origin);

// Every *.json under `dir`, sorted by id; the first bad file is an error.
Result<std::vector<LatencyProfile>> load_all_profiles(const std::string& dir = profiles_dir());

// "all" (every shipped profile) or a comma-separated list of names or paths.
Result<std::vector<LatencyProfile>> load_profiles(const std::string& list);

// The profile as its file holds it (profile_from_json(to_json(p)) == p).
nlohmann::json to_json(const LatencyProfile& profile);

}  // namespace tpmsec

#endif  // TPMSEC_EMULATION_PROFILE_FILE_H_
