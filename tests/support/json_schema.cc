#include "support/json_schema.h"

namespace tpmsec::testing {
namespace {

bool type_matches(const std::string& type, const nlohmann::json& v) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "integer") return v.is_number_integer() || v.is_number_unsigned();
  if (type == "number") return v.is_number();
  if (type == "null") return v.is_null();
  return false;
}

void check(const nlohmann::json& root, const nlohmann::json& schema, const nlohmann::json& v, const std::string& path,
           std::vector<std::string>& errors) {
  if (schema.contains("$ref")) {
    std::string ref = schema["$ref"];
    const std::string prefix = "#/$defs/";
    if (ref.rfind(prefix, 0) != 0 || !root["$defs"].contains(ref.substr(prefix.size()))) {
      errors.push_back(path + ": unresolvable $ref " + ref);
      return;
    }
    check(root, root["$defs"][ref.substr(prefix.size())], v, path, errors);
    return;
  }
  if (schema.contains("type") && !type_matches(schema["type"], v)) {
    errors.push_back(path + ": expected " + schema["type"].get<std::string>() + ", got " + v.type_name());
    return;
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& e : schema["enum"]) found |= e == v;
    if (!found) errors.push_back(path + ": " + v.dump() + " is not one of " + schema["enum"].dump());
  }
  if (v.is_object()) {
    for (const auto& key : schema.value("required", nlohmann::json::array())) {
      if (!v.contains(key.get<std::string>()))
        errors.push_back(path + ": missing required '" + key.get<std::string>() + "'");
    }
    if (schema.contains("properties")) {
      for (const auto& [key, sub] : schema["properties"].items()) {
        if (v.contains(key)) check(root, sub, v[key], path + "/" + key, errors);
      }
    }
  }
  if (v.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < v.size(); ++i) check(root, schema["items"], v[i], path + "/" + std::to_string(i), errors);
  }
}

}  // namespace

std::vector<std::string> validate_json(const nlohmann::json& schema, const nlohmann::json& value) {
  std::vector<std::string> errors;
  check(schema, schema, value, "", errors);
  return errors;
}

}  // namespace tpmsec::testing
