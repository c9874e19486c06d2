// Boost's assertion handler for the fuzzing tree (HEARTH_FUZZ defines
// BOOST_ENABLE_ASSERT_HANDLER everywhere and links this into every target).
//
// The fuzz tree keeps assertions on, to catch a broken invariant anywhere on an input's path.
// One of Boost.Beast 1.74's own assertions is wrong: basic_parser.ipp's `n >= 5` in
// parse_chunk_header, reached by a chunked body whose final chunk comes in a read after its
// size line (found by http_fuzz after ~9.9 million executions; http_fuzz writes it among its
// seeds as found-beast-final-chunk-assert). Beast removed that assertion upstream
// (boostorg/beast PR #2861). hearthd's Release build has NDEBUG, so the assertion is not
// compiled and the parser continues, as it does here; ASan and UBSan still check every access
// that follows. Any other failed assertion aborts, as assert() does.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

bool known_false(const char* expr, const char* file) {
  const char* tail = "boost/beast/http/impl/basic_parser.ipp";
  const size_t n = std::strlen(file), t = std::strlen(tail);
  return n >= t && std::strcmp(file + n - t, tail) == 0 && std::strcmp(expr, "n >= 5") == 0;
}

}  // namespace

namespace boost {

void assertion_failed_msg(const char* expr, const char* msg, const char* function, const char* file, long line) {
  if (known_false(expr, file)) return;
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed%s%s\n", file, line, function, expr, msg ? ": " : "",
               msg ? msg : "");
  std::abort();
}

void assertion_failed(const char* expr, const char* function, const char* file, long line) {
  assertion_failed_msg(expr, nullptr, function, file, line);
}

}  // namespace boost
