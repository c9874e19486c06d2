// How a request's answer is held to its response format or to its tools' calls: the
// grammar its tokens must follow, compiled for the model off the io thread (the job's
// prepare step: a new schema or tool list may take a while; one seen before comes from the
// compiler's cache), and the events its text is read into.
//
// Tools (tool_choice auto, required or a named function) are a triggered grammar
// (grammar.h): free text (auto) or none (required, named), and wherever the model opens a
// call — in its template's own form, or in one of the forms small models write instead
// (engine/tokenizer/tool_calls.h) — the rest of the call is forced: an offered function's
// name, arguments that fit its parameters' schema, the form's close. So a call the model
// meant is always whole and well-formed, and prose stays prose.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "engine/tokenizer/chat_template.h"
#include "ipc/errors.h"
#include "ipc/generation.h"

namespace hearth {
class GrammarCompiler;
}

namespace hearth::ipc {

using PrepareStep = std::function<std::optional<ApiError>(GenerationRequest&)>;

// Whether the model calls the request's tools (tools offered, tool_choice not none).
bool calls_tools(const ApiRequest& request);

// What cannot be asked together: a response format with tools the model calls (its free
// text is the only part a format could hold, and a grammar cannot say where that is).
std::optional<ApiError> check_constraints(const ApiRequest& request);

// The step that compiles the request's grammar into GenerationRequest::grammar, or an empty
// function when the answer is free text. The step answers 400 for a schema that does not
// compile or uses what the grammar cannot enforce (param: response_format, or tools).
PrepareStep grammar_step(const ApiRequest& request, const ChatTemplate& tmpl,
                         std::shared_ptr<GrammarCompiler> compiler);

// The events the answer's text is read into: calls split out when the model calls tools, the
// reasoning block out of a chat answer when the model's template has one.
EventStream event_stream(const ApiRequest& request, const ChatTemplate& tmpl);

}  // namespace hearth::ipc
