// JSON written the way chat templates write it. Hugging Face transformers renders templates
// with its own `tojson` filter, which is Python's json.dumps(x, ensure_ascii=False[,
// indent=N]) -- not jinja2's built-in (which sorts keys and escapes <, >, &, '). Templates
// get tool objects and call arguments as Python values parsed from the client's JSON, so what
// they write is json.dumps(json.loads(text)): whitespace dropped, ", " and ": " between
// items (with an indent: "," at line ends and N spaces a level), keys in the order given,
// strings re-escaped, numbers as Python prints them. Internal to engine/tokenizer.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace hearth::tok {

// json.dumps(json.loads(json_text), ensure_ascii=False) when indent < 0, with indent=indent
// otherwise. As Python:
//  - strings: only ", \, and the controls U+0000..U+001F are escaped (\n \r \t \b \f, others
//    as \u00xx, lower-case hex); everything else, non-ASCII and U+007F included, is written
//    as itself (UTF-8). Escapes in the input (\/ \u00e9 \ud83d\ude00) are undone first.
//  - integers keep their digits, however many ("-0" becomes "0"); numbers with a fraction or
//    an exponent become the shortest text that reads back as the same double, fixed-point
//    when its decimal exponent is in [-4, 16) with ".0" added to whole values ("1.0",
//    "0.001", "1e-05", "1e+16", "1.5e+300").
//  - a key given twice keeps its first place and its last value.
// Malformed JSON, numbers too large for a double (Python would print "Infinity"), and lone
// UTF-16 surrogates are errors.
Result<std::string> python_json_dumps(std::string_view json_text, int indent = -1);

// json.dumps(s, ensure_ascii=False) of a string: `utf8` quoted and escaped as above.
std::string python_json_string(std::string_view utf8);

}  // namespace hearth::tok
