// Checked reads of JSON fields: every type mismatch becomes an UNSUPPORTED_GRAPH_FORMAT error that
// names the field; nothing throws.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "frost/error.h"
#include "frost/types.h"

namespace frost::detail {

using json = nlohmann::json;

error_t json_format_error(std::string_view where, std::string_view what);

// Each reader leaves `out` untouched when the key is absent (and returns an error only if required).
error_t read_bool(const json& j, const char* key, bool& out, bool required = false);
error_t read_int(const json& j, const char* key, int64_t& out, bool required = false);
error_t read_double(const json& j, const char* key, double& out, bool required = false);
error_t read_string(const json& j, const char* key, std::string& out, bool required = false);
error_t read_int_list(const json& j, const char* key, std::vector<int64_t>& out, bool required = false);
error_t read_opt_int(const json& j, const char* key, std::optional<int64_t>& out);
error_t read_opt_float(const json& j, const char* key, std::optional<float>& out);

template <class E>
error_t read_enum(const json& j, const char* key, E& out, bool required = false) {
  std::string s;
  bool present = j.contains(key);
  FROST_CHECK(read_string(j, key, s, required));
  if (!present) return {};
  auto v = from_string<E>(s);
  if (!v) return json_format_error(key, "unknown value '" + s + "'");
  out = *v;
  return {};
}

template <class T>
void write_opt(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

}  // namespace frost::detail
