#include "ipc/constraints.h"

#include "engine/sampling/grammar.h"

namespace hearth::ipc {

PrepareStep grammar_step(const ApiRequest& request, std::shared_ptr<GrammarCompiler> compiler) {
  const ResponseFormat& format = request.response_format;
  if (format.kind == ResponseFormat::Kind::Text || compiler == nullptr) return {};
  return [format, compiler](GenerationRequest& gen) -> std::optional<ApiError> {
    Result<std::shared_ptr<const CompiledGrammar>> grammar = format.kind == ResponseFormat::Kind::JsonObject
                                                                 ? compiler->json_object()
                                                                 : compiler->json_schema(format.schema);
    if (!grammar) return bad_request(grammar.error().message, "response_format", "invalid_schema");
    gen.grammar = std::move(*grammar);
    return std::nullopt;
  };
}

}  // namespace hearth::ipc
