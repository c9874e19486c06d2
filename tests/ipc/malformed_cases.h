// The malformed requests of malformed_test.cpp, as bytes: each with the status the server
// answers it with and the request field its error names. Also the seeds of the HTTP fuzzer
// (http_fuzz.cpp writes them out), so that the fuzzer starts from every case the tests know.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hearth::test {

struct MalformedCase {
  std::string name;
  std::string raw;  // the bytes sent
  int status;
  std::string param;       // when not empty: error.param must start with it (Anthropic's: the message names it)
  bool anthropic = false;  // answered with Anthropic's error object, not OpenAI's
  bool ollama = false;     // an Ollama route: the error is Ollama's {"error": "<message>"}
};

inline constexpr const char* kChatPath = "/v1/chat/completions";
inline constexpr const char* kCompletionsPath = "/v1/completions";
inline constexpr const char* kMessagesPath = "/v1/messages";
inline constexpr const char* kCountTokensPath = "/v1/messages/count_tokens";

// The valid bodies the JSON-level cases break one field of.
nlohmann::json chat_base();
nlohmann::json completion_base();
nlohmann::json messages_base();  // Anthropic's /v1/messages

// Every field hearth reads with a value of the wrong type or out of range, unknown models,
// bad messages and prompts, prompts over the test server's 512-token context (400, 404); the
// same for Anthropic's /v1/messages and /v1/messages/count_tokens, with its own fields.
std::vector<MalformedCase> json_level_cases();
// Bodies that are not JSON objects, invalid UTF-8, bad tokenize/detokenize fields (400).
std::vector<MalformedCase> body_syntax_cases();
// Unknown routes (404), wrong methods (405), bodies over body_limit (413), broken HTTP
// (400), headers over the limit (431).
std::vector<MalformedCase> http_level_cases(size_t body_limit);

inline constexpr const char* kOllamaChatPath = "/api/chat";
inline constexpr const char* kOllamaGeneratePath = "/api/generate";

// Ollama's routes (the test server's model: synthetic Gemma 3, 512 tokens of context): every
// field of /api/chat and /api/generate and their options with values of the wrong type or out
// of range, bad messages and tools, what hearth refuses (think, tools, template, suffix,
// context, images), unknown models, prompts over the context, bodies that are not JSON
// objects, bad /api/show, /api/pull and /api/delete bodies (a loaded model: 409), and wrong
// methods; every one a 4xx with Ollama's error object.
std::vector<MalformedCase> ollama_cases();

}  // namespace hearth::test
