#include "graph/json_util.h"

#include <cmath>

namespace frost::detail {

error_t json_format_error(std::string_view where, std::string_view what) {
  return {error_code_t::UNSUPPORTED_GRAPH_FORMAT, "JSON: '" + std::string(where) + "': " + std::string(what)};
}

namespace {
error_t missing(const char* key, bool required) {
  return required ? json_format_error(key, "required field is missing") : error_t{};
}
}  // namespace

error_t read_bool(const json& j, const char* key, bool& out, bool required) {
  if (!j.is_object() || !j.contains(key)) return missing(key, required);
  const json& v = j[key];
  if (!v.is_boolean()) return json_format_error(key, "must be a boolean");
  out = v.get<bool>();
  return {};
}

error_t read_int(const json& j, const char* key, int64_t& out, bool required) {
  if (!j.is_object() || !j.contains(key)) return missing(key, required);
  const json& v = j[key];
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return json_format_error(key, "integer out of range");
    out = v.get<int64_t>();
    return {};
  }
  return json_format_error(key, "must be an integer");
}

error_t read_double(const json& j, const char* key, double& out, bool required) {
  if (!j.is_object() || !j.contains(key)) return missing(key, required);
  const json& v = j[key];
  if (!v.is_number()) return json_format_error(key, "must be a number");
  out = v.get<double>();
  return {};
}

error_t read_string(const json& j, const char* key, std::string& out, bool required) {
  if (!j.is_object() || !j.contains(key)) return missing(key, required);
  const json& v = j[key];
  if (!v.is_string()) return json_format_error(key, "must be a string");
  out = v.get<std::string>();
  return {};
}

error_t read_int_list(const json& j, const char* key, std::vector<int64_t>& out, bool required) {
  if (!j.is_object() || !j.contains(key)) return missing(key, required);
  const json& v = j[key];
  if (!v.is_array()) return json_format_error(key, "must be an array of integers");
  std::vector<int64_t> r;
  for (const json& e : v) {
    if (!e.is_number_integer() || (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
      return json_format_error(key, "must be an array of integers");
    r.push_back(e.get<int64_t>());
  }
  out = std::move(r);
  return {};
}

error_t read_opt_int(const json& j, const char* key, std::optional<int64_t>& out) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return {};
  int64_t v = 0;
  FROST_CHECK(read_int(j, key, v, true));
  out = v;
  return {};
}

error_t read_opt_float(const json& j, const char* key, std::optional<float>& out) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return {};
  double v = 0;
  FROST_CHECK(read_double(j, key, v, true));
  out = static_cast<float>(v);
  return {};
}

}  // namespace frost::detail
