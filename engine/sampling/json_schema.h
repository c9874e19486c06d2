// JSON Schemas as constrained decoding takes them (grammar.h): which keywords the grammar
// can enforce, and the schema rewritten so that the grammar's strict reading of it keeps its
// meaning.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace hearth {

// The first keyword of schema (JSON text) that the grammar cannot enforce, with where it is
// ("'uniqueItems' at /properties/tags"), or "" when every keyword is enforced or only
// annotates (title, description, default, examples, ...). Refused: not, if / then / else,
// dependentRequired, dependentSchemas, dependencies, uniqueItems (true), contains,
// minContains, maxContains, additionalItems, $dynamicRef, $recursiveRef, oneOf (its
// exclusivity cannot be enforced: use anyOf), allOf with more than one schema, multipleOf
// on a number that is not an integer, and a format other than those the grammar knows
// (date, time, date-time, duration, email, hostname, ipv4, ipv6, uri, uri-reference,
// uri-template, uuid, json-pointer, relative-json-pointer), and counted repeats the
// grammar cannot take (see kMaxCount in json_schema.cpp): minLength or maxLength above 128,
// a pattern (or patternProperties name) with a count over 128 or whose repeats add over 500
// characters, nested groups multiplied, or with over 16 quantifiers (*, +, ?, {n,m}; a
// group's counted once per repeat of it), or a schema whose repeats, each squared, sum past
// 250,000, or whose patterns' quantifier counts, each squared, past 1,024. Keywords JSON
// Schema does not define are ignored, as validators ignore them. Text that is not JSON
// gives "".
std::string unsupported_schema_keyword(std::string_view schema);

// The schema ready to compile, as compact JSON text: an error when it is not JSON, not an
// object (or true), or uses an unsupported keyword. The grammar compiles schemas strictly
// (an object's undeclared properties and an array's unlisted items are not generated); so
// that this never narrows a schema to nothing, every object that declares no properties and
// says nothing of others is made open ("additionalProperties": true: any object), and every
// array that lists no items is made open ("items": true). Objects that declare properties
// get exactly those: an answer fits the schema as given, never with invented keys. A string
// bounded only by minLength / maxLength becomes the pattern "^.{min,max}$" (the same
// strings, without the raw control characters the grammar's own bounded strings allow).
// A string with a pattern or a format and a length bound is refused.
Result<std::string> schema_for_grammar(std::string_view schema);

}  // namespace hearth
