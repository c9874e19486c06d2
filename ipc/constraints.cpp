#include "ipc/constraints.h"

#include "engine/sampling/grammar.h"
#include "engine/tokenizer/tool_calls.h"

namespace hearth::ipc {

namespace {

// One tag per form and callable tool: the form's trigger, or the whole opening for forms
// that ordinary text also uses; the tool's parameters as the arguments' schema.
std::vector<TriggeredTag> call_tags(const ApiRequest& request, const ChatTemplate& tmpl) {
  std::vector<TriggeredTag> tags;
  for (const CallForm& form : call_forms(tmpl, /*lenient=*/true)) {
    for (const Tool& tool : request.tools) {
      if (request.tool_choice == ToolChoice::Named && tool.name != request.tool_choice_name) continue;
      const std::string begin = form.open(tool.name);
      tags.push_back({form.trigger.empty() ? begin : form.trigger, begin, tool.parameters, form.close});
    }
  }
  return tags;
}

PrepareStep tools_step(const ApiRequest& request, const ChatTemplate& tmpl, std::shared_ptr<GrammarCompiler> compiler) {
  const bool only_calls = request.tool_choice == ToolChoice::Required || request.tool_choice == ToolChoice::Named;
  const bool one_call = request.tool_choice == ToolChoice::Named || !request.parallel_tool_calls;
  return [tags = call_tags(request, tmpl), only_calls, one_call, compiler](GenerationRequest& gen) {
    Result<std::shared_ptr<const CompiledGrammar>> grammar = compiler->triggered(tags, only_calls, one_call);
    if (!grammar) return std::optional<ApiError>(bad_request(grammar.error().message, "tools", "invalid_schema"));
    gen.grammar = std::move(*grammar);
    return std::optional<ApiError>();
  };
}

}  // namespace

bool calls_tools(const ApiRequest& request) {
  return !request.tools.empty() && request.tool_choice != ToolChoice::None;
}

std::optional<ApiError> check_constraints(const ApiRequest& request) {
  if (calls_tools(request) && request.response_format.kind != ResponseFormat::Kind::Text) {
    return bad_request(
        "response_format cannot be combined with tools the model may call; send tool_choice \"none\" to "
        "get an answer in the format",
        "response_format", "unsupported_parameter");
  }
  return std::nullopt;
}

PrepareStep grammar_step(const ApiRequest& request, const ChatTemplate& tmpl,
                         std::shared_ptr<GrammarCompiler> compiler) {
  if (compiler == nullptr) return {};
  if (calls_tools(request)) return tools_step(request, tmpl, std::move(compiler));
  const ResponseFormat& format = request.response_format;
  if (format.kind == ResponseFormat::Kind::Text) return {};
  return [format, compiler](GenerationRequest& gen) -> std::optional<ApiError> {
    Result<std::shared_ptr<const CompiledGrammar>> grammar = format.kind == ResponseFormat::Kind::JsonObject
                                                                 ? compiler->json_object()
                                                                 : compiler->json_schema(format.schema);
    if (!grammar) return bad_request(grammar.error().message, "response_format", "invalid_schema");
    gen.grammar = std::move(*grammar);
    return std::nullopt;
  };
}

EventStream event_stream(const ApiRequest& request, const ChatTemplate& tmpl) {
  EventStream events;
  if (calls_tools(request)) {
    std::vector<std::string> names;
    for (const Tool& t : request.tools) names.push_back(t.name);
    events = EventStream(call_forms(tmpl, /*lenient=*/true), std::move(names));
  }
  if (request.chat && chat_family_thinks(tmpl.family)) events.split_reasoning();
  return events;
}

}  // namespace hearth::ipc
