// libFuzzer target for hearthd's request path: the bytes a client sends on one connection,
// through the code the daemon runs for them, without a socket and without an engine:
//   1. Beast's HTTP/1.1 request parser with the server's limits (ipc/http_message.h: 16 KiB
//      of headers, the body limit of the configuration), fed from memory in reads of a size
//      the input picks, as a socket delivers them; requests in a row while the connection
//      stays open (keep-alive, pipelining), as Connection::serve_requests does;
//   2. a request that cannot be read mapped to its answer (read_error_answer); one that can,
//      through route(): routing and methods, the TCP listener's Host and Origin gates, the
//      OpenAI, Anthropic and Ollama validation, chat rendering with the model's template and
//      tokenization of the rendered prompt, the cache routes' parsing (warm and clear),
//      Ollama's model routes (tags, show, ps, pull, delete);
//   3. the answer built as the connection writes it (response_message), serialized and
//      parsed back; for a generation job, the response JSON built around its prompt's text.
// The host serves one EngineRef with a tokenizer and no scheduler: nothing is submitted, GET
// /api/cache answers 503, the EngineCalls of DELETE /api/cache and POST /api/load are
// checked but not run.
//
// Input: byte 0 picks the configuration (Config below), byte 1 the read size (0: one read
// of everything), the rest is what the client sends.
//
// Tokenizers, loaded once from the models folder ($HEARTH_MODELS, else
// ~/.local/share/hearth/models), each with its model's template:
//   ChatML: $HEARTH_FUZZ_MODEL, default qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (byte-level BPE);
//   Gemma:  gemma-3-270m-q4_k_m.gguf (SentencePiece);
//   Llama 3: SmolLM2-135M-Instruct.Q4_1.gguf's BPE tokenizer with the Llama 3 template (no
//            Llama 3 file is fetched).
// A file that is not there is replaced by a small SentencePiece vocabulary (bytes, letters,
// the templates' control tokens) written with hearth's gguf::Writer; stderr says which.
//
// Invariants (a violation prints what broke and traps, so libFuzzer keeps the input):
//  - a request that cannot be read is answered 400, 413 or 431; it goes unanswered only when
//    the input ended in the middle of it;
//  - every answer is well-formed HTTP that parses back to the same status and body; every
//    4xx/5xx is application/json with the error object of its path's API: Anthropic's
//    ({"type": "error", "error": {type, message}}) on /v1/messages and
//    /v1/messages/count_tokens, Ollama's {"error": "<message>"} and nothing else on Ollama's
//    routes, OpenAI's ({message, type, param, code}) everywhere else and for requests that
//    cannot be read; no 500; 503 only while no engine is loaded, after stop_accepting, or for
//    GET /api/cache (no scheduler here); a 405 has an Allow header; JSON answers parse, and
//    so does every NDJSON line;
//  - a generation or warm job has 1 .. n_ctx - 1 prompt tokens, each in the vocabulary, and
//    at most one token per body byte plus the template's fixed part (kTemplateTokens);
//    valid sampling, at most 4 non-empty stop strings (16 on /v1/messages and Ollama's
//    routes); a warm job generates one token;
//  - with a byte-level BPE tokenizer, a completion prompt's tokens decode to the prompt
//    exactly, and a ChatML prompt's tokens decode to text holding every message's content;
//  - the answers built from a prompt's token bytes (partial UTF-8 included) parse: whole
//    JSON, OpenAI's "data:" chunks up to [DONE], Anthropic's named events up to
//    message_stop, NDJSON lines up to a done object (Ollama's routes).
//
// Seeds: HEARTH_FUZZ_WRITE_SEEDS=DIR ./http_fuzz writes the malformed requests of
// malformed_cases.cpp (each in three configurations) and a few valid requests into DIR and
// exits; scripts/fuzz does this before each run.
#include <algorithm>
#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "fuzz_seeds.h"
#include "http_client.h"
#include "ipc/api/anthropic_request.h"
#include "ipc/api/ollama_request.h"
#include "ipc/api/openai_request.h"
#include "ipc/api/openai_response.h"
#include "ipc/http_message.h"
#include "ipc/json_fields.h"
#include "ipc/metrics.h"
#include "ipc/route_table.h"
#include "malformed_cases.h"
#include "one_model_host.h"
#include "tests/test_util.h"

namespace {

using namespace hearth;
using namespace hearth::ipc;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using json = nlohmann::ordered_json;

constexpr int kMaxRequests = 16;         // per input (one connection)
constexpr int32_t kLargeCtx = 4096;      // hearthd's default context
constexpr int32_t kSmallCtx = 64;        // to reach context_length_exceeded with small inputs
constexpr size_t kTemplateTokens = 160;  // ChatML's default system prompt (Qwen: ~30 tokens) and turn markup, with room

[[noreturn]] void fail(const std::string& what, std::string_view detail = {}) {
  std::fprintf(stderr, "http_fuzz: invariant broken: %s\n", what.c_str());
  if (!detail.empty())
    std::fprintf(stderr, "  detail: %.*s\n", static_cast<int>(std::min<size_t>(detail.size(), 2000)), detail.data());
  __builtin_trap();
}

void require(bool ok, const std::string& what, std::string_view detail = {}) {
  if (!ok) fail(what, detail);
}

// ---- the engines: a tokenizer and a template each, no scheduler ----

struct Engine {
  std::vector<uint8_t> bytes;  // the synthetic vocabulary's file, when no model file was found
  std::unique_ptr<Tokenizer> tokenizer;
  bool byte_level_bpe = false;
  // Byte-level BPE: whether the vocabulary has a token for each byte (one that decodes to it
  // alone). SmolLM2's lacks some (0xF2, the lead byte of U+80000..U+BFFFF): such a byte is
  // dropped by the tokenizer, as llama.cpp drops it (found by this fuzzer; checked against
  // llama-server's /tokenize, which gives the same ids).
  std::array<bool, 256> has_byte_token{};
  std::shared_ptr<const EngineRef> large, small;               // n_ctx kLargeCtx and kSmallCtx
  std::shared_ptr<test::OneModelHost> large_host, small_host;  // each serving one of them
};

// text less the bytes the vocabulary has no token for: what its tokens decode to.
std::string representable(const Engine& e, std::string_view text) {
  std::string out;
  for (char ch : text)
    if (e.has_byte_token[static_cast<unsigned char>(ch)]) out += ch;
  return out;
}

// A SentencePiece vocabulary with no model behind it: the control tokens the three
// templates write, the 256 byte tokens, the space piece, letters and a few words.
std::vector<uint8_t> synthetic_vocab_gguf() {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // llama.cpp's: 1 normal, 2 unknown, 3 control, 6 byte
  auto add = [&](std::string t, float score, int32_t type) {
    tokens.push_back(std::move(t));
    scores.push_back(score);
    types.push_back(type);
  };
  add("<unk>", 0, 2);
  add("<s>", 0, 3);
  add("</s>", 0, 3);
  for (const char* c : {"<bos>", "<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>",
                        "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"})
    add(c, 0, 3);
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, 6);
  const std::string sp = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  float score = -1;
  for (const char* w : {"", "the", "user", "model", "assistant", "system", "a", "is"}) add(sp + w, score--, 1);
  for (const char* w : {"user", "model", "assistant", "system", "er", "in", "th"}) add(w, score--, 1);
  for (char c = 'a'; c <= 'z'; ++c) add(std::string(1, c), score--, 1);
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  return w.serialize();
}

template <class T>
T must(Result<T> r, const std::string& what) {
  if (!r.ok()) {
    std::fprintf(stderr, "http_fuzz: %s: %s\n", what.c_str(), r.error().message.c_str());
    std::exit(1);
  }
  return std::move(*r);
}

Engine load_engine(ChatFamily family, const std::string& file_name) {
  Engine e;
  std::string path = file_name.empty() ? "" : test::installed_model_path(file_name);
  if (family == ChatFamily::ChatML) {
    if (const char* m = std::getenv("HEARTH_FUZZ_MODEL"); m && *m) path = m;
  }
  ModelInfo info;
  std::unique_ptr<gguf::File> file;
  if (!path.empty() && std::filesystem::exists(path)) {
    file = must(gguf::File::open(path), path);
    info.id = std::filesystem::path(path).stem().string();
    info.path = path;
  } else {
    e.bytes = synthetic_vocab_gguf();
    file = must(gguf::File::from_memory(e.bytes.data(), e.bytes.size()), "synthetic vocabulary");
    info.id = std::string("synthetic-") + chat_family_name(family);
    info.path = "/nonexistent/" + info.id + ".gguf";
  }
  e.tokenizer = must(Tokenizer::from_gguf(*file), "tokenizer of " + info.id);
  Result<std::string_view> model = file->get_string("tokenizer.ggml.model");
  e.byte_level_bpe = model.ok() && *model == "gpt2";
  for (int32_t id = 0; e.byte_level_bpe && id < e.tokenizer->n_vocab(); ++id)
    if (const std::string b = e.tokenizer->token_bytes(id); b.size() == 1)
      e.has_byte_token[static_cast<unsigned char>(b[0])] = true;
  if (family == ChatFamily::Llama3 || !file->has("tokenizer.chat_template")) {
    info.chat_template = ChatTemplate{family};
    // The synthetic ChatML engine writes a default system prompt, as Qwen's template does.
    if (family == ChatFamily::ChatML) info.chat_template.default_system = "You are a fuzzing target.";
  } else {
    info.chat_template = must(chat_template_from_gguf(*file), "chat template of " + info.id);
  }
  std::fprintf(stderr, "http_fuzz: %s template, tokenizer %s (%s)\n", chat_family_name(family),
               path.empty() || !std::filesystem::exists(path) ? "synthetic (gguf::Writer)" : path.c_str(),
               e.byte_level_bpe ? "byte-level BPE" : "SentencePiece");
  info.aliases = {"fuzz:latest"};
  info.arch = "fuzz";
  info.backend = "cpu";
  info.created = 1700000000;
  for (int32_t n_ctx : {kLargeCtx, kSmallCtx}) {
    auto ref = std::make_shared<EngineRef>();
    ref->tokenizer = e.tokenizer.get();
    ref->model = info;
    ref->model.n_ctx = n_ctx;
    ref->n_ctx = n_ctx;
    (n_ctx == kLargeCtx ? e.large_host : e.small_host) = std::make_shared<test::OneModelHost>(ref);
    (n_ctx == kLargeCtx ? e.large : e.small) = std::move(ref);
  }
  return e;
}

struct Engines {
  Engine chatml, gemma, llama3;
};

const Engines& engines() {
  static const Engines* e = [] {
    auto* es = new Engines;
    es->chatml = load_engine(ChatFamily::ChatML, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    es->gemma = load_engine(ChatFamily::Gemma, "gemma-3-270m-q4_k_m.gguf");
    es->llama3 = load_engine(ChatFamily::Llama3, "SmolLM2-135M-Instruct.Q4_1.gguf");
    return es;
  }();
  return *e;
}

// ---- one input: the configuration, then the connection's bytes ----

struct Config {
  const Engine* engine = nullptr;  // bits 0-1: ChatML, Gemma, Llama 3, or none loaded yet
  bool tcp = false;                // bit 2: the loopback TCP listener (Host check, Origin gate, CORS)
  bool accepting = true;           // bit 3 clears it: after stop_accepting
  size_t body_limit = 8u << 20;    // bits 4-5: hearthd's default, the tests' 16 KiB, 64 bytes, the default
  bool small_ctx = false;          // bit 6: a 64-token context
  bool root = false;               // bit 7: the peer is uid 0 (a cache admin) rather than uid 1000
};

Config read_config(uint8_t b) {
  Config c;
  const Engines& e = engines();
  const Engine* table[] = {&e.chatml, &e.gemma, &e.llama3, nullptr};
  c.engine = table[b & 3];
  c.tcp = (b & 4) != 0;
  c.accepting = (b & 8) == 0;
  const size_t limits[] = {8u << 20, 16u << 10, 64, 8u << 20};
  c.body_limit = limits[(b >> 4) & 3];
  c.small_ctx = (b & 64) != 0;
  c.root = (b & 128) != 0;
  return c;
}

// A SyncReadStream over the input: each read_some hands out at most `chunk` bytes (a socket
// delivers a request in pieces), then end of file.
class MemoryStream {
 public:
  MemoryStream(std::string_view data, size_t chunk) : data_(data), chunk_(chunk) {}

  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, beast::error_code& ec) {
    ec = {};
    if (data_.empty()) {
      ec = net::error::eof;
      return 0;
    }
    const size_t n = net::buffer_copy(buffers, net::buffer(data_.data(), std::min(chunk_, data_.size())));
    data_.remove_prefix(n);
    return n;
  }
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    beast::error_code ec;
    const size_t n = read_some(buffers, ec);
    if (ec) throw beast::system_error(ec);
    return n;
  }

  bool at_end() const { return data_.empty(); }

 private:
  std::string_view data_;
  size_t chunk_;
};

json parse_or_fail(const std::string& text, const std::string& what) {
  json j = json::parse(text, nullptr, false);
  require(!j.is_discarded(), what + ": not JSON", text);
  return j;
}

bool is_path(std::string_view target, std::string_view path) {
  return target.substr(0, target.find('?')) == path;
}

// Ollama's error object: {"error": "<message>"}, nothing else.
void check_ollama_error_body(const std::string& body) {
  const json j = parse_or_fail(body, "error body");
  require(j.is_object() && j.size() == 1 && j.contains("error") && j["error"].is_string() &&
              !j["error"].get<std::string>().empty(),
          "an Ollama route's error that is not {\"error\": \"<message>\"}", body);
}

void check_error_body(const std::string& body, ErrorShape shape) {
  if (shape == ErrorShape::Ollama) return check_ollama_error_body(body);
  const json j = parse_or_fail(body, "error body");
  require(j.is_object() && j.contains("error") && j["error"].is_object(), "error body without an error object", body);
  const json& e = j["error"];
  if (shape == ErrorShape::Anthropic) {
    require(j.size() == 2 && j.contains("type") && j["type"] == "error", "Anthropic's error without type \"error\"",
            body);
    require(e.size() == 2 && e.contains("type") && e["type"].is_string(), "Anthropic's error.type", body);
    require(e.contains("message") && e["message"].is_string() && !e["message"].get<std::string>().empty(),
            "error.message must be a non-empty string", body);
    return;
  }
  require(e.contains("message") && e["message"].is_string() && !e["message"].get<std::string>().empty(),
          "error.message must be a non-empty string", body);
  require(e.contains("type") && e["type"].is_string(), "error.type must be a string", body);
  require(e.contains("param") && (e["param"].is_null() || e["param"].is_string()), "error.param", body);
  require(e.contains("code") && (e["code"].is_null() || e["code"].is_string()), "error.code", body);
}

// The answer as the connection writes it, serialized and parsed back.
void check_wire(const HttpResponse& r, unsigned version, bool keep_alive, bool head, const HeaderList& cors) {
  const ResponseMessage m = response_message(r, version, keep_alive, head, cors);
  // RFC 9110 15.3.5: a 204 carries no Content-Length.
  require(r.status != 204 || m.find(http::field::content_length) == m.end(), "a 204 with a Content-Length");
  std::ostringstream out;
  out << m;
  const std::string wire = out.str();
  http::response_parser<http::string_body> p;
  p.skip(head);
  p.eager(true);
  p.body_limit(boost::none);
  beast::error_code ec;
  size_t used = p.put(net::buffer(wire), ec);
  if (!ec && !p.is_done()) p.put_eof(ec);
  require(!ec && p.is_done(), "the answer does not parse back as HTTP: " + ec.message(), wire);
  require(used <= wire.size(), "parser overran");
  const auto& back = p.get();
  require(back.result_int() == static_cast<unsigned>(r.status), "status changed on the wire", wire);
  require(back.body() == (head ? std::string() : r.body), "body changed on the wire", wire);
  require(back.keep_alive() == keep_alive || version == 10, "keep-alive changed on the wire", wire);
}

bool is_path(const HttpRequest& req, std::string_view path) {
  return is_path(std::string_view(req.target), path);
}

std::string_view path_of(const HttpRequest& req) {
  std::string_view t = req.target;
  return t.substr(0, t.find('?'));
}

void check_response(const HttpResponse& r, const HttpRequest& req, const Config& c) {
  // 409: DELETE /api/delete of the loaded model; 501: what Ollama has and hearth does not.
  static const int kAllowed[] = {200, 204, 400, 403, 404, 405, 409, 415, 501, 503};
  require(std::find(std::begin(kAllowed), std::end(kAllowed), r.status) != std::end(kAllowed),
          "unexpected status " + std::to_string(r.status), r.body);
  if (r.status >= 400) {
    require(r.content_type == "application/json", "an error that is not application/json", r.content_type);
    check_error_body(r.body, error_shape_of_target(req.target));
  }
  if (r.status == 200 && r.content_type == "application/x-ndjson") {
    for (size_t at = 0, nl; at < r.body.size(); at = nl + 1) {
      nl = r.body.find('\n', at);
      require(nl != std::string::npos, "an NDJSON line without its newline", r.body);
      parse_or_fail(r.body.substr(at, nl - at), "NDJSON line");
    }
  }
  if (r.status == 405) require(!r.allow.empty(), "405 without Allow");
  if (r.status == 503) {
    require(c.engine == nullptr || !c.accepting || (is_path(req, "/api/cache") && req.method != "DELETE"),
            "503 with an engine loaded and accepting", req.method + " " + req.target);
  }
  if (r.status == 200 && r.content_type == "application/json") parse_or_fail(r.body, "200 answer");
  if (r.status == 204) require(r.body.empty(), "204 with a body");
}

// OpenAI's stream: "data: <chunk>\n\n" each, the last "data: [DONE]".
void check_openai_stream(const std::string& wire) {
  std::vector<std::string> payloads;
  for (size_t at = 0; at < wire.size();) {
    const size_t end = wire.find("\n\n", at);
    require(wire.compare(at, 6, "data: ") == 0 && end != std::string::npos, "a stream that is not SSE", wire);
    payloads.push_back(wire.substr(at + 6, end - at - 6));
    at = end + 2;
  }
  require(!payloads.empty() && payloads.back() == "[DONE]", "a stream that does not end with [DONE]", wire);
  for (size_t i = 0; i + 1 < payloads.size(); ++i) parse_or_fail(payloads[i], "stream chunk");
}

// Anthropic's stream: "event: <type>\ndata: <json with that type>\n\n" each, from
// message_start to message_stop.
void check_anthropic_stream(const std::string& wire) {
  std::vector<std::string> types;
  for (size_t at = 0; at < wire.size();) {
    const size_t end = wire.find("\n\n", at);
    const size_t nl = wire.find('\n', at);
    require(wire.compare(at, 7, "event: ") == 0 && end != std::string::npos && nl < end &&
                wire.compare(nl + 1, 6, "data: ") == 0,
            "a stream that is not SSE with event names", wire);
    types.push_back(wire.substr(at + 7, nl - at - 7));
    const json data = parse_or_fail(wire.substr(nl + 7, end - nl - 7), "stream event");
    require(data.is_object() && data.value("type", "") == types.back(), "an event whose data is of another type", wire);
    at = end + 2;
  }
  require(types.size() >= 4 && types.front() == "message_start" && types.back() == "message_stop",
          "a stream that is not message_start ... message_stop", wire);
}

bool is_ollama_generation(const HttpRequest& req) {
  return is_path(req, "/api/chat") || is_path(req, "/api/generate");
}

// Nothing lost on the way through a byte-level BPE tokenizer: a completion prompt's tokens
// decode to the prompt, a ChatML prompt holds every message's content.
void check_prompt_text(const GenerationJob& job, const HttpRequest& req, const Config& c, const std::string& text) {
  const EngineRef& engine = *job.engine;
  json j;
  require(!parse_json(req.body, &j).has_value(), "a job from a body that does not parse");
  ApiRequest areq;
  if (is_path(req, "/v1/messages")) {
    auto parsed = parse_anthropic_request(j, AnthropicPurpose::Message);
    require(std::holds_alternative<ApiRequest>(parsed), "a job from a request that does not validate");
    areq = std::get<ApiRequest>(parsed);
  } else if (is_ollama_generation(req)) {
    auto parsed = parse_ollama_request(is_path(req, "/api/chat") ? OllamaEndpoint::Chat : OllamaEndpoint::Generate, j);
    require(std::holds_alternative<OllamaRequest>(parsed), "a job from a request that does not validate");
    areq = std::get<OllamaRequest>(parsed);
    if (areq.parse_special) return;  // raw: special-token text became special tokens
  } else {
    const Endpoint endpoint = is_path(req, "/v1/chat/completions") ? Endpoint::Chat : Endpoint::Completions;
    auto parsed = parse_openai_request(endpoint, j, engine.model.id, engine.model.aliases);
    require(std::holds_alternative<OpenAiRequest>(parsed), "a job from a request that does not validate");
    areq = std::get<OpenAiRequest>(parsed);
  }
  if (!areq.chat) {
    require(text == representable(*c.engine, areq.prompt),
            "the prompt's tokens do not decode to the prompt (less bytes without a token)", areq.prompt);
  } else if (engine.model.chat_template.family == ChatFamily::ChatML) {
    for (const ChatMessage& m : areq.messages)
      require(text.find(representable(*c.engine, m.content)) != std::string::npos,
              "a message's content is not in the rendered prompt", m.content);
  }
}

// The answer the job's own writer builds around the prompt's bytes (pieces may split a UTF-8
// character): every SSE payload up to [DONE], every NDJSON line up to the done object, and a
// whole answer parse.
void check_written(const GenerationJob& job, const HttpRequest& req) {
  const Tokenizer& tok = *job.engine->tokenizer;
  const std::vector<int32_t>& prompt = job.request.prompt;
  ResponseWriter& writer = *job.writer;
  std::string wire = writer.streamed() ? writer.open() : "";
  for (size_t i = 0; i < prompt.size() && i < 8; ++i) {
    ApiEvent piece;
    piece.text = tok.token_bytes(prompt[i]);
    wire += writer.write(piece);
  }
  ApiEvent done;
  done.kind = ApiEvent::Kind::Done;
  done.finish_reason = "length";
  done.usage.prompt_tokens = static_cast<int32_t>(prompt.size());
  wire += writer.write(done);
  if (!writer.streamed()) {
    require(wire.empty(), "a whole answer that wrote stream bytes", wire);
    const HttpResponse r = writer.response();
    require(r.status == 200, "a whole answer that is not 200", r.body);
    parse_or_fail(r.body, "whole answer");
  } else if (is_ollama_generation(req)) {
    require(writer.content_type() == "application/x-ndjson", "an Ollama stream that is not NDJSON");
    json last;
    for (size_t at = 0, nl; at < wire.size(); at = nl + 1) {
      nl = wire.find('\n', at);
      require(nl != std::string::npos, "an NDJSON line without its newline", wire);
      last = parse_or_fail(wire.substr(at, nl - at), "NDJSON line");
    }
    require(last.is_object() && last.value("done", false), "an Ollama stream that does not end with done", wire);
  } else if (is_path(req, "/v1/messages")) {
    check_anthropic_stream(wire);
  } else {
    check_openai_stream(wire);
  }
}

void check_job(const GenerationJob& job, const HttpRequest& req, const Config& c) {
  require(c.engine != nullptr && c.accepting, "a job without an engine, or after stop_accepting");
  require(job.engine != nullptr, "a job without its engine");
  const EngineRef& engine = *job.engine;
  const Tokenizer& tok = *engine.tokenizer;
  const std::vector<int32_t>& prompt = job.request.prompt;
  require(!prompt.empty(), "an empty prompt", req.body);
  require(static_cast<int64_t>(prompt.size()) < engine.n_ctx, "a prompt that leaves no room in n_ctx", req.body);
  for (int32_t id : prompt) require(id >= 0 && id < tok.n_vocab(), "a token outside the vocabulary");
  require(prompt.size() <= req.body.size() + kTemplateTokens,
          "more tokens than body bytes + the template: " + std::to_string(prompt.size()), req.body);
  const bool warm = is_path(req, "/api/cache/warm");
  const bool ollama = is_ollama_generation(req);
  require(job.writer != nullptr, "a job without a writer");
  if (warm) {
    require(job.request.warm && job.request.max_tokens == 1 && !job.writer->streamed(),
            "a warm job that is not one greedy token, answered whole");
  } else {
    require(is_path(req, "/v1/chat/completions") || is_path(req, "/v1/completions") || is_path(req, "/v1/messages") ||
                ollama,
            "a job from another route", req.target);
    require(job.request.max_tokens == -1 || job.request.max_tokens >= 1, "max_tokens");
  }
  require(job.request.sampling.validate().ok(), "sampling parameters out of range");
  const bool anthropic = is_path(req, "/v1/messages");
  require(job.request.stop.size() <= (anthropic || ollama ? 16u : 4u), "more stop strings than the API takes");
  for (const std::string& s : job.request.stop) require(!s.empty(), "an empty stop string");
  if (c.engine->byte_level_bpe && !warm) check_prompt_text(job, req, c, tok.decode(prompt));
  check_written(job, req);
}

ResponseCounters& counters() {
  static ResponseCounters* c = new ResponseCounters;
  return *c;
}

void run_connection(const Config& c, std::string_view bytes, size_t chunk) {
  static const std::vector<std::string> kAllowedOrigins = {"http://localhost:3000"};
  PeerIdentity peer;
  if (c.tcp) {
    peer = tcp_peer();
  } else {
    peer.known = true;
    peer.uid = c.root ? 0 : 1000;
    peer.gid = 1000;
    peer.pid = 4242;
  }
  MemoryStream stream(bytes, chunk == 0 ? bytes.size() + 1 : chunk);
  beast::flat_buffer buffer;
  for (int n = 0; n < kMaxRequests; ++n) {
    RequestParser parser;
    set_request_limits(parser, c.body_limit);
    beast::error_code ec;
    http::read_header(stream, buffer, parser, ec);
    if (!ec && !parser.is_done()) http::read(stream, buffer, parser, ec);
    if (ec) {
      const std::optional<ApiError> error = read_error_answer(ec, c.body_limit);
      if (!error) {
        require(stream.at_end(), "a read error other than the end of the input: " + ec.message());
        return;
      }
      require(error->status == 400 || error->status == 413 || error->status == 431,
              "a read error answered " + std::to_string(error->status));
      // As the connection answers it: in the error object of the path's API, once the request
      // line is read (the target is empty until then).
      const std::string target(parser.get().target());
      const HttpResponse r = error_response(*error, error_shape_of_target(target));
      check_error_body(r.body, error_shape_of_target(target));
      check_wire(r, 11, false, false, {});
      return;
    }
    ReadRequest read = take_request(parser);
    const HttpRequest& request = read.request;
    bool keep_alive = read.keep_alive && c.accepting;
    const HeaderList cors = answer_cors(request, peer, kAllowedOrigins);

    RouteContext ctx;
    if (c.engine) ctx.host = c.small_ctx ? c.engine->small_host.get() : c.engine->large_host.get();
    ctx.accepting = c.accepting;
    ctx.check_host = c.tcp;
    ctx.peer = peer;
    ctx.scope_mode = CacheScopeMode::User;
    ctx.allowed_origins = &kAllowedOrigins;
    ctx.counters = &counters();
    ctx.open_connections = 1;
    RouteResult result = route(request, ctx);
    if (auto* r = std::get_if<HttpResponse>(&result)) {
      check_response(*r, request, c);
      counters().count(r->status);
      check_wire(*r, read.version, keep_alive, read.head, cors);
    } else if (auto* call = std::get_if<EngineCall>(&result)) {
      const bool clear = request.method == "DELETE" && is_path(request, "/api/cache") && call->engine;
      const bool load = request.method == "POST" && is_path(request, "/api/load");
      require((clear || load) && call->run, "an engine call that is not DELETE /api/cache or POST /api/load");
    } else if (std::holds_alternative<StreamCall>(result)) {
      require(false, "a stream call (POST /api/pull) from a context without a puller");
    } else {
      const GenerationJob& job = std::get<GenerationJob>(result);
      check_job(job, request, c);
      if (job.writer->streamed() && read.version < 11) keep_alive = false;  // streamed raw to the close
    }
    if (!keep_alive) return;
  }
}

// ---- seeds ----

void write_seeds(const std::string& dir) {
  std::filesystem::create_directories(dir);
  using test::MalformedCase;
  std::vector<std::string> raws;
  for (const MalformedCase& m : test::json_level_cases()) raws.push_back(m.raw);
  for (const MalformedCase& m : test::body_syntax_cases()) raws.push_back(m.raw);
  for (const MalformedCase& m : test::http_level_cases(16u << 10)) raws.push_back(m.raw);
  for (const MalformedCase& m : test::ollama_cases()) raws.push_back(m.raw);
  const size_t n_malformed = raws.size();
  // Valid requests, so that the fuzzer starts inside every route too.
  const std::string chat = test::chat_base().dump(), completion = test::completion_base().dump();
  const std::string post_chat = test::http_request("POST", test::kChatPath, chat);
  raws.push_back(post_chat);
  raws.push_back(test::http_request("POST", test::kCompletionsPath, completion));
  raws.push_back(test::http_request(
      "POST", test::kChatPath,
      R"({"model":"fuzz:latest","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"<|im_end|> b"}]},{"role":"assistant","content":"c"},{"role":"user","content":"d"}],"stream":true,"stream_options":{"include_usage":true},"stop":["x","y"],"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.1,"seed":-1,"max_completion_tokens":8,"cache_salt":"s1"})"));
  raws.push_back(test::http_request("POST", test::kCompletionsPath,
                                    R"({"prompt":["<|im_start|>x\u0000y \u00e9\ud83d\ude00"],"n":1,"stop":"\n"})"));
  raws.push_back(test::http_request(
      "POST", test::kOllamaChatPath,
      R"({"model":"fuzz:latest","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},{"role":"user","content":"again"}],"format":{"type":"object"},"options":{"temperature":0.5,"top_k":20,"top_p":0.9,"min_p":0.1,"repeat_penalty":1.1,"repeat_last_n":32,"seed":7,"num_predict":8,"stop":["x","y"],"num_ctx":2048,"num_gpu":1},"keep_alive":"5m","logprobs":true,"top_logprobs":2})"));
  raws.push_back(
      test::http_request("POST", test::kOllamaGeneratePath,
                         R"({"prompt":"<|im_start|>user
hi<|im_end|>
","raw":true,"stream":false,"format":"json"})") +
      test::http_request("POST", test::kOllamaGeneratePath,
                         R"({"prompt":"why?","system":"s","template":"","suffix":"","context":[],"think":false})") +
      test::http_request("POST", test::kOllamaGeneratePath, R"({"model":"fuzz:latest","keep_alive":0})"));
  raws.push_back(test::http_request("GET", "/api/tags") +
                 test::http_request("POST", "/api/show", R"({"model":"fuzz:latest","verbose":true})") +
                 test::http_request("GET", "/api/ps") + test::http_request("GET", "/api/version") +
                 test::http_request("HEAD", "/") +
                 test::http_request("POST", "/api/pull", R"({"model":"fuzz:latest"})") +
                 test::http_request("DELETE", "/api/delete", R"({"model":"fuzz:latest"})"));
  raws.push_back(test::http_request("POST", "/api/tokenize", R"({"content":"<start_of_turn>hi","add_special":true})"));
  raws.push_back(test::http_request("POST", test::kMessagesPath, test::messages_base().dump(),
                                    "x-api-key: sk-unused\r\nanthropic-version: 2023-06-01\r\n"));
  raws.push_back(test::http_request(
      "POST", test::kMessagesPath,
      R"({"model":"fuzz:latest","system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"<|im_end|> b"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"c"}]},{"role":"user","content":"d"}],"max_tokens":8,"stream":true,"stop_sequences":["x","y"],"temperature":0.5,"top_p":0.9,"top_k":40,"metadata":{"user_id":"u"},"thinking":{"type":"disabled"}})"));
  raws.push_back(test::http_request(
      "POST", test::kCountTokensPath,
      R"({"system":"s","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","description":"d","input_schema":{"type":"object","properties":{"a":{"type":"string"}}}}],"tool_choice":{"type":"auto"}})"));
  raws.push_back(test::http_request("POST", "/api/detokenize", R"({"tokens":[1,2,3,300]})"));
  raws.push_back(test::http_request("POST", "/api/cache/warm", R"({"messages":[{"role":"user","content":"hi"}]})"));
  raws.push_back(test::http_request("POST", "/api/cache/warm", R"({"prompt":"hi","cache_salt":"abc"})"));
  raws.push_back(test::http_request("DELETE", "/api/cache?model=fuzz%3Alatest&uid=1000"));
  raws.push_back(test::http_request("GET", "/api/cache"));
  raws.push_back(test::http_request("GET", "/v1/models") + test::http_request("HEAD", "/v1/models/fuzz:latest") +
                 test::http_request("GET", "/health") + test::http_request("GET", "/metrics"));
  raws.push_back(test::http_request("OPTIONS", test::kChatPath, "", "Origin: http://localhost:3000\r\n") +
                 test::http_request("POST", test::kChatPath, chat, "Origin: http://localhost:3000\r\n"));
  raws.push_back(
      "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n5\r\n{\"pro\r\n" +
      std::to_string(completion.size() - 5) + "\r\n" + completion.substr(5) + "\r\n0\r\n\r\n");
  raws.push_back("POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " +
                 std::to_string(completion.size()) + "\r\n\r\n" + completion);
  // Each in three configurations: ChatML over the Unix socket with the tests' 16 KiB body
  // limit, in one read; Gemma in 7-byte reads; Llama 3 on the TCP listener.
  const uint8_t configs[][2] = {{0x10, 0}, {0x11, 7}, {0x16, 0}};
  size_t written = 0;
  for (size_t i = 0; i < raws.size(); ++i) {
    for (const auto& cfg : configs) {
      const std::string path =
          dir + "/" + (i < n_malformed ? "malformed-" : "valid-") + std::to_string(i) + "-" + std::to_string(cfg[0]);
      std::ofstream out(path, std::ios::binary);
      out.put(static_cast<char>(cfg[0]));
      out.put(static_cast<char>(cfg[1]));
      out << raws[i];
      if (!out) {
        std::fprintf(stderr, "http_fuzz: cannot write %s\n", path.c_str());
        std::exit(1);
      }
      ++written;
    }
  }
  // Inputs that broke something once, with their own configuration and read size, so every
  // run passes through them again. beast-final-chunk-assert: a chunked body's final chunk
  // read one byte at a time, then a byte that is not CRLF; it reached Beast 1.74's false
  // assertion (tests/fuzz_assert_handler.cpp), minimized from a 4 KiB input.
  // bpe-byte-without-token: a completion prompt with U+9F600, whose lead byte 0xF2 has no
  // token in SmolLM2's vocabulary (Engine::has_byte_token).
  const std::string missing_byte_body = R"({"prompt":["<|im_start|>x\n0000y \u00e9\udA3d\ude00"]})";
  const std::pair<const char*, std::string> found[] = {
      {"beast-final-chunk-assert", std::string("\x16\x01O m HTTP/1.1\r\nTransfer-Encoding:chunked\r\n\r\n0\r\n{", 49)},
      {"bpe-byte-without-token",
       std::string("\x16\x00", 2) + test::http_request("POST", test::kCompletionsPath, missing_byte_body)},
  };
  for (const auto& [name, bytes] : found) {
    std::ofstream out(dir + "/found-" + name, std::ios::binary);
    out << bytes;
    if (!out) {
      std::fprintf(stderr, "http_fuzz: cannot write %s/found-%s\n", dir.c_str(), name);
      std::exit(1);
    }
  }
  std::fprintf(stderr,
               "http_fuzz: wrote %zu seeds (%zu malformed requests, %zu valid, x3 configurations; %zu found before) "
               "to %s\n",
               written + std::size(found), n_malformed, raws.size() - n_malformed, std::size(found), dir.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hearth::test::write_seeds_if_asked(write_seeds);
  engines();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const Config c = read_config(data[0]);
  run_connection(c, std::string_view(reinterpret_cast<const char*>(data) + 2, size - 2), data[1]);
  return 0;
}
