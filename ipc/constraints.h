// How a request's answer is held to its response format (and, with tools, to its calls'
// form): the grammar its tokens must follow, compiled for the model off the io thread (the
// job's prepare step: a new schema may take a while; one seen before comes from the
// compiler's cache).
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "ipc/errors.h"
#include "ipc/generation.h"

namespace hearth {
class GrammarCompiler;
}

namespace hearth::ipc {

using PrepareStep = std::function<std::optional<ApiError>(GenerationRequest&)>;

// The step that compiles the request's grammar into GenerationRequest::grammar, or an empty
// function when the answer is free text. The step answers 400 for a schema that does not
// compile or uses what the grammar cannot enforce (param names the schema's field).
PrepareStep grammar_step(const ApiRequest& request, std::shared_ptr<GrammarCompiler> compiler);

}  // namespace hearth::ipc
