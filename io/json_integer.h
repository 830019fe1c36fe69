// Integers read from JSON files that polymargin did not necessarily write itself (model headers,
// shard manifests). The JSON library's get<integer>() converts a float with a plain cast, which is
// undefined behaviour when the float lies outside the type's range (6.5e19 as a size, found by the
// model-loader fuzzer), and it wraps an integer that does not fit without a word.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

namespace polymargin::io {

/// `j` as a T when it is a JSON integer within T's range; nullopt otherwise (a float, a string, an
/// integer too large or negative for T).
template <typename T>
std::optional<T> json_integer(const nlohmann::json& j) {
  if (j.is_number_unsigned()) {
    const auto v = j.get<std::uint64_t>();
    if (std::in_range<T>(v)) return static_cast<T>(v);
  } else if (j.is_number_integer()) {
    const auto v = j.get<std::int64_t>();
    if (std::in_range<T>(v)) return static_cast<T>(v);
  }
  return std::nullopt;
}

}  // namespace polymargin::io
