// A small JSON Schema validator for the keywords tpmsec's schemas use:
// type, required, properties, items, enum, $ref to "#/$defs/NAME".
#ifndef TPMSEC_TESTS_SUPPORT_JSON_SCHEMA_H_
#define TPMSEC_TESTS_SUPPORT_JSON_SCHEMA_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpmsec::testing {

// Returns the violations ("/strategies/0/per_extend_ms: missing required 'median'"); empty when valid.
std::vector<std::string> validate_json(const nlohmann::json& schema, const nlohmann::json& value);

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_JSON_SCHEMA_H_
