// Durations as people and Ollama write them: "5m", "30s", "1h30m", "250ms", "0", a bare
// number of seconds ("300", "1.5"), negative for "for ever" ("-1", "-1m"). Used by
// hearthd's --keep-alive and a request's keep_alive.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace hearth {

// The duration text names, or nullopt when it is not one (empty, an unknown unit, a number
// that does not fit). Units: ns, us, µs, ms, s, m, h; several may follow each other ("1h30m").
// A bare number is seconds. The sign applies to the whole text.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace hearth
