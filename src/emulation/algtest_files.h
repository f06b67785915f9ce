// Reading tpm2-algtest's result files (private to the emulation layer):
// the text of a file, performance.yaml's entries, the fixed properties of
// detail/Capability_properties-fixed.txt and the per-iteration durations of
// detail/Perf_*.csv. Only the subset tpm2-algtest writes is read; anything
// else is skipped or refused, never trusted.
#ifndef TPMSEC_SRC_EMULATION_ALGTEST_FILES_H_
#define TPMSEC_SRC_EMULATION_ALGTEST_FILES_H_

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tpmsec/result.h"

namespace tpmsec::algtest {

// An item's text: `s` without its leading list dashes ("- key") and the
// blanks around it (tpmsec/text.h's trim(); the lines of algtest's files
// hold no LF).
std::string item_text(std::string_view s);
// item_text(s) without one pair of surrounding double quotes.
std::string unquote(std::string s);

// The whole file; false when it cannot be read.
bool read_text(const std::filesystem::path& path, std::string* out);
std::vector<std::string> lines_of(const std::string& text);
// A finite number at the start of `s`.
bool number(const std::string& s, double* v);

// One "- ..." entry of a performance.yaml section: its "key: value" pairs.
struct YamlEntry {
  std::string section;  // "TPM2_Sign"
  std::map<std::string, std::string> fields;
};

// The entries of every "TPM2_*:" section; `header` gets the top-level
// "key: value" lines before the first section.
std::vector<YamlEntry> yaml_entries(const std::string& text, std::map<std::string, std::string>* header);

// "TPM2_PT_X:\n  raw: 0x..\n  value: ..." -> name -> (raw, value).
using FixedProperties = std::map<std::string, std::pair<std::string, std::string>>;
FixedProperties fixed_properties(const std::string& text);
// A property's raw value; 0 when absent or not a number.
uint32_t raw_value(const FixedProperties& props, const char* name);

// Successful iterations of a CSV (duration,duration_extra,return_code), in ms.
Result<std::vector<double>> read_csv(const std::filesystem::path& path);

}  // namespace tpmsec::algtest

#endif  // TPMSEC_SRC_EMULATION_ALGTEST_FILES_H_
