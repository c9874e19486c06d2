/*
 * libhearth-client: the C API of hearth, the offline LLM assistant daemon (hearthd).
 *
 * The library speaks HTTP/1.1 to hearthd over its Unix socket (OpenAI-compatible routes);
 * it shares nothing with the daemon but that wire format. The header compiles as C99 and as
 * C++. Link with `pkg-config --cflags --libs hearth-client`.
 *
 * Conventions (in the manner of libcurl and sqlite3):
 *   - Handles are opaque (hearth_client*). Every call that can fail returns an int status:
 *     HEARTH_OK (0) or one of the HEARTH_ERR_* codes below. hearth_strerror() names a code
 *     (a static string); hearth_client_last_error() gives the detail of the last failure on
 *     a handle (for example the daemon's own error message).
 *   - Memory the library hands out (texts, model lists) is allocated with malloc and must be
 *     released with hearth_free(). Pointers the caller passes in are only read during the
 *     call; the library keeps none of them.
 *   - Structs that cross the API begin with a struct_size member and only ever grow at the
 *     end: initialise them with the matching *_init() function (it sets struct_size), and
 *     the library reads or writes only the members that fit in struct_size. When a struct
 *     grows, its *_init() keeps writing the old size for the programs built before, and the
 *     header's *_init() becomes a macro passing sizeof to a new *_init_sized() function
 *     (hearth_request_options_init in 0.4, hearth_stats_init in 0.6).
 *
 * Thread-safety: the library has no global state. A hearth_client handle must be used by
 * one thread at a time (use one handle per thread for concurrent requests), with a single
 * exception: hearth_client_cancel() may be called at any time from any thread, and from a
 * signal handler (it is async-signal-safe). hearth_strerror(), hearth_client_version() and
 * the *_init() functions are safe everywhere.
 *
 * Minimal use (streaming):
 *
 *   static int print_piece(const char* piece, size_t len, void* user) {
 *     fwrite(piece, 1, len, stdout);
 *     return 0;                                  // non-zero would abort: HEARTH_ERR_CANCELLED
 *   }
 *   hearth_client* c;
 *   int rc = hearth_client_open(NULL, &c);       // NULL: discover the socket
 *   if (rc == HEARTH_OK) {
 *     hearth_message m = {"user", "Why is the sky blue?"};
 *     rc = hearth_client_chat(c, &m, 1, NULL, print_piece, NULL, NULL, NULL);
 *     if (rc != HEARTH_OK) fprintf(stderr, "%s: %s\n", hearth_strerror(rc), hearth_client_last_error(c));
 *   }
 *   hearth_client_close(c);
 */
#ifndef HEARTH_CLIENT_H
#define HEARTH_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "hearth/client_version.h" /* HEARTH_CLIENT_VERSION_MAJOR/MINOR/PATCH, HEARTH_CLIENT_VERSION */

#if defined(HEARTH_CLIENT_BUILDING)
#define HEARTH_CLIENT_API __attribute__((visibility("default")))
#else
#define HEARTH_CLIENT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes ------------------------------------------------------------------------ */

/* Values are stable across versions; new codes are only ever appended. */
enum hearth_status {
  HEARTH_OK = 0,
  HEARTH_ERR_INVALID_ARGUMENT = 1, /* a NULL handle, a missing required argument, a bad value */
  HEARTH_ERR_NOMEM = 2,            /* an allocation failed */
  HEARTH_ERR_NO_DAEMON = 3,        /* the socket file is missing, or nothing listens on it */
  HEARTH_ERR_IO = 4,               /* the connection broke (read/write failed, daemon went away) */
  HEARTH_ERR_PROTOCOL = 5,         /* the daemon's answer was not the HTTP/JSON/SSE expected */
  HEARTH_ERR_HTTP = 6,             /* an HTTP error status not covered below (hearth_client_http_status) */
  HEARTH_ERR_CANCELLED = 7,        /* hearth_client_cancel() or a callback's non-zero return */
  HEARTH_ERR_BUSY = 8,             /* 429: the daemon's queue is full; retry later */
  HEARTH_ERR_UNAVAILABLE = 9,      /* 503: the daemon is loading its model or shutting down */
  HEARTH_ERR_BAD_REQUEST = 10,     /* 400/404/413/422: the daemon rejected the request (see last_error) */
  HEARTH_ERR_SERVER = 11,          /* the daemon reported an error inside a stream, or a 500 */
  HEARTH_ERR_INTERNAL = 12,        /* a bug in this library (unexpected exception) */
  HEARTH_ERR_TIMEOUT = 13          /* the daemon sent nothing for the read timeout (hearth_client_set_timeout) */
};

/* Short English description of a status code: a static string, never NULL ("unknown error"
 * for codes this version does not know). */
HEARTH_CLIENT_API const char* hearth_strerror(int code);

/* ---- version ----------------------------------------------------------------------------- */

/* The version of the library actually loaded at run time ("MAJOR.MINOR.PATCH"; static string).
 * Compare with HEARTH_CLIENT_VERSION to detect a header/library mismatch. */
HEARTH_CLIENT_API const char* hearth_client_version(void);

/* ---- memory ------------------------------------------------------------------------------ */

/* Frees memory returned by this library (texts, model lists). NULL is allowed. */
HEARTH_CLIENT_API void hearth_free(void* ptr);

/* ---- the handle -------------------------------------------------------------------------- */

typedef struct hearth_client hearth_client;

/* Creates a handle for the daemon on socket_path. With socket_path NULL (or ""), the socket
 * is discovered, first match wins:
 *   1. $HEARTH_SOCKET, when set and not empty;
 *   2. $XDG_RUNTIME_DIR/hearth/hearth.sock, when XDG_RUNTIME_DIR is set and that file exists;
 *   3. /run/hearth/hearth.sock, when it exists;
 *   4. otherwise the user path of 2 (or 3 without XDG_RUNTIME_DIR), so that errors name it.
 * Opening does not connect: a missing daemon is reported by the first request
 * (HEARTH_ERR_NO_DAEMON, after the connect retry of hearth_client_set_connect_retry).
 * The handle keeps its connection open between requests (HTTP/1.1 keep-alive) and sends the
 * next request on it. A connection the daemon closed meanwhile (its idle timeout, a restart)
 * is replaced by a fresh one; a request that finds it closed as it goes out, before any byte
 * of the answer, is sent again once on a fresh connection (the daemon cannot have begun it).
 * A request that fails, times out or is cancelled closes its connection, so the next one
 * never starts on a half-read answer. hearth_client_close closes the connection.
 * On success *out receives the handle (free it with hearth_client_close); on failure *out
 * is set to NULL. Errors: HEARTH_ERR_INVALID_ARGUMENT (out NULL, path longer than a Unix
 * socket address allows), HEARTH_ERR_NOMEM. */
HEARTH_CLIENT_API int hearth_client_open(const char* socket_path, hearth_client** out);

/* Frees the handle. NULL is allowed. Must not race with a call running on it. */
HEARTH_CLIENT_API void hearth_client_close(hearth_client* client);

/* The socket path the handle uses (valid until hearth_client_close); "" for NULL. */
HEARTH_CLIENT_API const char* hearth_client_socket_path(const hearth_client* client);

/* Detail of the last failed call on this handle: the daemon's error message when it sent
 * one, otherwise what went wrong locally; "" after a successful call. Valid until the next
 * call on the handle. Never NULL. */
HEARTH_CLIENT_API const char* hearth_client_last_error(const hearth_client* client);

/* HTTP status of the last response received on this handle (200, 400, 429, 503, ...), or 0
 * when no response arrived (no daemon, connection failed, cancelled before the headers). */
HEARTH_CLIENT_API int hearth_client_http_status(const hearth_client* client);

/* Makes the request running on this handle return HEARTH_ERR_CANCELLED promptly, by shutting
 * its connection down; the daemon sees the disconnect and frees the sequence. A request
 * still waiting for the socket to appear (hearth_client_set_connect_retry) stops waiting
 * within a few milliseconds. Callable from any thread and from a signal handler
 * (async-signal-safe: atomics and shutdown(2) only). A cancel while no request runs has no
 * effect (it does not cancel the next one, nor close the kept connection). */
HEARTH_CLIENT_API void hearth_client_cancel(hearth_client* client);

/* ---- connection settings ----------------------------------------------------------------- */

/* Added in 0.2. Sets the read timeout of the following requests on this handle: how long a
 * request waits for the daemon to send anything, in milliseconds — for the answer to begin,
 * and then between two reads of it (a stream that stalls midway for timeout_ms fails too).
 * When it passes, the request returns HEARTH_ERR_TIMEOUT and closes its connection (the
 * daemon sees a disconnect and stops generating). A request that is not streamed (on_text
 * NULL, list_models, cache_warm, ...) receives nothing until its answer is whole, so its
 * timeout must cover the whole generation. 0 (the default): wait as long as it takes.
 * Errors: HEARTH_ERR_INVALID_ARGUMENT (client NULL, timeout_ms < 0). */
HEARTH_CLIENT_API int hearth_client_set_timeout(hearth_client* client, int timeout_ms);

/* The connect retry a new handle has, in milliseconds. */
#define HEARTH_CONNECT_RETRY_DEFAULT_MS 2000

/* Added in 0.2. Sets how long the following requests on this handle keep trying to connect
 * while the socket file is missing or nobody listens on it (ENOENT, ECONNREFUSED), as for a
 * moment while hearthd restarts: attempts back off from 10 ms to 200 ms apart until retry_ms
 * have passed since the first, then the request returns HEARTH_ERR_NO_DAEMON.
 * hearth_client_cancel ends the wait (HEARTH_ERR_CANCELLED). Default
 * HEARTH_CONNECT_RETRY_DEFAULT_MS; 0: one attempt, HEARTH_ERR_NO_DAEMON at once.
 * Errors: HEARTH_ERR_INVALID_ARGUMENT (client NULL, retry_ms < 0). */
HEARTH_CLIENT_API int hearth_client_set_connect_retry(hearth_client* client, int retry_ms);

/* ---- requests ---------------------------------------------------------------------------- */

/* Receives generated text as it streams: piece is len bytes of UTF-8 (not NUL-terminated,
 * valid only during the call). Return 0 to go on; non-zero aborts the request, which then
 * returns HEARTH_ERR_CANCELLED. Called on the thread that made the request. */
typedef int (*hearth_text_callback)(const char* piece, size_t len, void* user_data);

/* Sampling and request options. Members left at the value hearth_request_options_init sets
 * are not sent, so the daemon's defaults apply. */
typedef struct hearth_request_options {
  size_t struct_size;      /* set by hearth_request_options_init: sizeof(hearth_request_options) */
  const char* model;       /* model id as hearth_client_list_models reports it; NULL: the loaded one */
  int32_t max_tokens;      /* tokens to generate at most; <= 0: daemon default */
  float temperature;       /* >= 0 (0: greedy); < 0: daemon default */
  float top_p;             /* (0, 1]; < 0: daemon default */
  int32_t top_k;           /* >= 0 (0: disabled); < 0: daemon default */
  float min_p;             /* [0, 1]; < 0: daemon default */
  int has_seed;            /* non-zero: send seed */
  uint64_t seed;           /* random seed for sampling; only with has_seed */
  const char* const* stop; /* n_stop stop strings (not included in the output); may be NULL */
  size_t n_stop;
  float presence_penalty;   /* [-2, 2]; 0 (the default): not sent */
  float frequency_penalty;  /* [-2, 2]; 0 (the default): not sent */
  float repetition_penalty; /* > 0; 1 (the default): not sent */
  /* Added in 0.4: tools, and the shape of the answer. Answers are decoded under a grammar,
   * so a tool call's arguments are always a JSON object that fits the tool's parameters and
   * a schema'd answer always fits its schema. Tool calls come back through
   * hearth_client_chat_v2. */
  const char* tools;       /* chat only: the functions the model may call, as JSON text: an array of OpenAI tool
                              objects, [{"type": "function", "function": {"name", "description", "parameters"}}]
                              (parameters: a JSON Schema of an object); NULL (the default): none */
  const char* tool_choice; /* "auto" (the daemon's default with tools: text or calls, as the model decides),
                              "required" (one call or more), "none" (text only), the name of one tool (a call of
                              it), or OpenAI's JSON object form as text; NULL (the default): not sent */
  int parallel_tool_calls; /* < 0 (the default): not sent (several calls allowed); 0: one call at most; > 0: several */
  int response_format;     /* enum hearth_response_format; HEARTH_FORMAT_TEXT (the default): not sent */
  const char* json_schema; /* HEARTH_FORMAT_JSON_SCHEMA: the JSON Schema the answer fits, as JSON text */
  int json_schema_strict;  /* HEARTH_FORMAT_JSON_SCHEMA: non-zero sends OpenAI's "strict": true */
  /* Added in 0.5: a thinking model's reasoning (Qwen3's <think> block), which the daemon keeps
   * out of the answer's text. Chats only. */
  hearth_text_callback on_reasoning; /* the reasoning as it streams (the daemon's reasoning_content),
                                        a distinct kind from on_text: each piece of it, with the
                                        request's user_data, before the answer's text; non-zero
                                        aborts. Not streamed (on_text NULL): the whole reasoning
                                        once, before the call returns. NULL (the default): the
                                        reasoning is dropped */
  int thinking;                      /* enum hearth_thinking; HEARTH_THINKING_DEFAULT: not sent (the model's own) */
  int32_t thinking_budget_tokens;    /* > 0: the reasoning's bound in tokens, after which the daemon closes
                                        the block and the answer follows; 0 (the default): not sent */
} hearth_request_options;

/* Sets struct_size and every member to its "not sent" default. A macro since 0.4: the
 * function behind it is told the size of the caller's struct, so that a program built
 * against this header and run with a later library, whose struct has grown, is never
 * written past its end. struct_size: the size of *options (sizeof(hearth_request_options)
 * as the caller was built; for bindings that call the library directly). */
HEARTH_CLIENT_API void hearth_request_options_init_sized(hearth_request_options* options, size_t struct_size);
/* The function of 0.1 to 0.3, which programs built against those headers call: it sets the
 * members up to repetition_penalty, the struct as it was then, and struct_size to their size. */
HEARTH_CLIENT_API void hearth_request_options_init(hearth_request_options* options);
#define hearth_request_options_init(options) \
  hearth_request_options_init_sized((options), sizeof(hearth_request_options))

/* Added in 0.5. Whether a thinking model thinks (hearth_request_options.thinking). */
enum hearth_thinking {
  HEARTH_THINKING_DEFAULT = 0, /* not sent: the model's own (Qwen3 thinks) */
  HEARTH_THINKING_OFF = 1,     /* sent as OpenAI's "reasoning_effort": "none": it answers at once */
  HEARTH_THINKING_ON = 2       /* sent as "chat_template_kwargs": {"enable_thinking": true} */
};

/* Added in 0.4. What the answer must be (hearth_request_options.response_format). */
enum hearth_response_format {
  HEARTH_FORMAT_TEXT = 0,        /* free text (the default) */
  HEARTH_FORMAT_JSON_OBJECT = 1, /* any JSON object */
  HEARTH_FORMAT_JSON_SCHEMA = 2  /* JSON that fits hearth_request_options.json_schema */
};

/* Why generation ended. */
enum hearth_finish_reason {
  HEARTH_FINISH_NONE = 0,      /* unknown: the daemon did not say (or the request failed) */
  HEARTH_FINISH_STOP = 1,      /* end of turn, end of text or a stop string */
  HEARTH_FINISH_LENGTH = 2,    /* max_tokens or the context size was reached */
  HEARTH_FINISH_OTHER = 3,     /* any other reason the daemon reported */
  HEARTH_FINISH_TOOL_CALLS = 4 /* added in 0.4: the answer ends with tool calls (hearth_client_chat_v2) */
};

/* What a finished request reports (from the daemon's usage and timings objects; members the
 * daemon did not send are 0). Times in milliseconds, rates in tokens per second. */
typedef struct hearth_stats {
  size_t struct_size;        /* set by hearth_stats_init: sizeof(hearth_stats) */
  int64_t prompt_tokens;     /* tokens in the rendered prompt */
  int64_t completion_tokens; /* tokens generated */
  int64_t cached_tokens;     /* prompt tokens served from the prompt cache (not prefilled) */
  double ttft_ms;            /* request admitted -> first token (daemon side) */
  double prefill_ms;         /* prompt processing */
  double decode_ms;          /* first token -> last token */
  double prefill_tok_s;      /* prefilled tokens / prefill time */
  double decode_tok_s;       /* generated tokens / decode time */
  double itl_mean_ms;        /* inter-token latency: mean, median and 95th percentile */
  double itl_p50_ms;
  double itl_p95_ms;
  double queue_ms;             /* time waiting in the daemon's queue before admission */
  double total_ms;             /* measured by the client: request sent -> response complete */
  int finish_reason;           /* enum hearth_finish_reason */
  char finish_reason_text[32]; /* the daemon's finish_reason string ("stop", "length", ...), "" if none */
  /* Added with the prompt cache: where the prompt's tokens came from. cached_tokens above is
   * cached_memory_tokens + cached_disk_tokens; the rest of the prompt was prefilled. */
  int64_t cached_memory_tokens; /* attached from KV blocks held in memory */
  int64_t cached_disk_tokens;   /* restored from the daemon's cache directory */
  int64_t prefilled_tokens;     /* computed */
  double cache_restore_ms;      /* looking up and restoring cached KV */
  /* Added with the step budget. */
  double itl_max_ms;   /* the longest gap between two tokens */
  double prefill_gops; /* prefill: 10^9 multiply-add ops/s in the model's weights (compute-bound) */
  double decode_gb_s;  /* decode: 10^9 bytes/s of weights read (memory-bound) */
  /* Added with the disk-restore figures. */
  int64_t cache_restore_bytes; /* KV bytes read back from the daemon's cache directory */
  /* Added in 0.6, with speculative decoding. */
  int64_t draft_tokens;    /* tokens drafted and verified in a forward pass */
  int64_t accepted_tokens; /* ... of which kept: tokens that needed no pass of their own */
} hearth_stats;

/* Sets struct_size and zeroes every other member. A macro since 0.6 (the struct grew the
 * speculative decoding counts): the function behind it is told the size of the caller's
 * struct, so a program built against an older header is never written past its end.
 * struct_size: sizeof(hearth_stats) as the caller was built (for bindings). */
HEARTH_CLIENT_API void hearth_stats_init_sized(hearth_stats* stats, size_t struct_size);
/* The function of 0.1 to 0.5, which programs built against those headers call: it zeroes
 * the members up to cache_restore_bytes, the struct as it was then. */
HEARTH_CLIENT_API void hearth_stats_init(hearth_stats* stats);
#define hearth_stats_init(stats) hearth_stats_init_sized((stats), sizeof(hearth_stats))

/* One chat message. role: "system", "user" or "assistant"; content: UTF-8 text. */
typedef struct hearth_message {
  const char* role;
  const char* content;
} hearth_message;

/* Generates the assistant's reply to n_messages messages (POST /v1/chat/completions).
 *   options   may be NULL (all defaults).
 *   on_text   non-NULL: the request streams and every piece of text goes to on_text as it
 *             arrives; NULL: the request is not streamed.
 *   out_text  may be NULL; otherwise receives the whole reply as a NUL-terminated malloc'ed
 *             string (free with hearth_free), or NULL on failure.
 *   out_stats may be NULL; otherwise filled (see hearth_stats); on failure it holds whatever
 *             arrived before the failure.
 * Blocks until the reply is complete, the request fails or it is cancelled. Errors:
 * HEARTH_ERR_INVALID_ARGUMENT, _NO_DAEMON, _IO, _PROTOCOL, _HTTP, _BUSY, _UNAVAILABLE,
 * _BAD_REQUEST, _SERVER, _CANCELLED, _TIMEOUT, _NOMEM; hearth_client_last_error() has the
 * detail. It cannot return tool calls: options with tools are refused
 * (HEARTH_ERR_INVALID_ARGUMENT; hearth_client_chat_v2 takes them); response_format works. */
HEARTH_CLIENT_API int hearth_client_chat(hearth_client* client, const hearth_message* messages, size_t n_messages,
                                         const hearth_request_options* options, hearth_text_callback on_text,
                                         void* user_data, char** out_text, hearth_stats* out_stats);

/* Continues a raw prompt (POST /v1/completions; no chat template). Arguments and errors as
 * for hearth_client_chat (response_format works; tools and tool_choice are for chats). */
HEARTH_CLIENT_API int hearth_client_complete(hearth_client* client, const char* prompt,
                                             const hearth_request_options* options, hearth_text_callback on_text,
                                             void* user_data, char** out_text, hearth_stats* out_stats);

/* ---- tool calls (added in 0.4) ------------------------------------------------------------ */

/* One call of a tool: what the model asked for, and what an assistant message carries when
 * the conversation goes on. Its layout is fixed for good (it is handed out in arrays); new
 * members would go to a new struct. */
typedef struct hearth_tool_call {
  const char* id;        /* the daemon's id for it ("call_..."); a tool message's tool_call_id names it */
  const char* name;      /* the function's name, one of the request's tools */
  const char* arguments; /* the function's arguments: a JSON object, as text */
} hearth_tool_call;

/* One chat message, with what tool use adds to hearth_message:
 *   role "system", "user" or "assistant" with content;
 *   role "assistant" with the tool calls it made (tool_calls, n_tool_calls: as
 *     hearth_client_chat_v2 returned them) and content NULL, or the text said with them;
 *   role "tool" with the result of one call as content and that call's id as tool_call_id.
 * Members added later go at the end; the library reads an array of these with the stride of
 * the first element's struct_size, so every element must be initialised the same way: with
 * hearth_chat_message_init, or in C with {.struct_size = sizeof(hearth_chat_message),
 * .role = ..., .content = ...} (members left out are zero, their default). */
typedef struct hearth_chat_message {
  size_t struct_size;                 /* sizeof(hearth_chat_message) */
  const char* role;                   /* "system", "user", "assistant" or "tool" */
  const char* content;                /* UTF-8 text; NULL only for an assistant message with tool calls */
  const hearth_tool_call* tool_calls; /* assistant: n_tool_calls calls; NULL when none */
  size_t n_tool_calls;
  const char* tool_call_id; /* tool: the id of the call this is the result of; else NULL */
} hearth_chat_message;

/* Sets struct_size and every other member to NULL or 0. */
HEARTH_CLIENT_API void hearth_chat_message_init(hearth_chat_message* message);

/* hearth_client_chat with tools: messages as hearth_chat_message, and the tool calls of the
 * answer (offered with hearth_request_options.tools). Streamed or not, on_text receives the
 * text only, never a call's arguments; the calls are returned whole when the answer is
 * complete (a call cannot run before its arguments are complete, and the answer ends right
 * after its last call). stats.finish_reason is HEARTH_FINISH_TOOL_CALLS when it called.
 *   out_calls, out_n_calls  may both be NULL (the calls are then dropped); otherwise on success
 *             *out_calls is one malloc'ed block holding *out_n_calls calls and their strings
 *             (free it with a single hearth_free), or NULL when the model called nothing. On
 *             failure NULL and 0.
 * Other arguments, and errors, as for hearth_client_chat; also HEARTH_ERR_INVALID_ARGUMENT
 * for tools or a json_schema that is not JSON (tools: an array), a message's struct_size
 * that is too small or unlike the first's, a tool message without tool_call_id, and a
 * tool call with a NULL member. What the daemon refuses (an unknown tool_choice name, a
 * schema it cannot enforce) is HEARTH_ERR_BAD_REQUEST, its message in last_error. */
HEARTH_CLIENT_API int hearth_client_chat_v2(hearth_client* client, const hearth_chat_message* messages,
                                            size_t n_messages, const hearth_request_options* options,
                                            hearth_text_callback on_text, void* user_data, char** out_text,
                                            hearth_tool_call** out_calls, size_t* out_n_calls, hearth_stats* out_stats);

/* ---- models and health ------------------------------------------------------------------- */

/* One model the daemon serves (GET /v1/models). */
typedef struct hearth_model_info {
  const char* id;       /* the name to pass as hearth_request_options.model */
  const char* owned_by; /* "" when the daemon did not say */
  int64_t created;      /* unix seconds; 0 when unknown */
} hearth_model_info;

/* Lists the daemon's models. On success *out_models is one malloc'ed block holding
 * *out_count entries and their strings (free it with a single hearth_free), or NULL when
 * the count is 0. On failure *out_models is NULL and *out_count 0. */
HEARTH_CLIENT_API int hearth_client_list_models(hearth_client* client, hearth_model_info** out_models,
                                                size_t* out_count);

/* The models installed on the daemon's machine (GET /api/models) as a NUL-terminated JSON
 * text: {"dir", "models": [{"id", "file", "bytes", "modified", "catalog", "available",
 * "loaded", "architecture", "name", "quantization", "parameters", "context_length",
 * "error"}], "catalog": [{"name", "file", "bytes", "license", "about", "installed"}]}
 * (docs/protocol.md describes every field; new ones may appear). Every model file in the
 * daemon's models folder is listed, with why it cannot be served where it cannot; "loaded"
 * marks the one the daemon serves. On success *out_json is malloc'ed (free with
 * hearth_free); on failure it is NULL. Errors as for hearth_client_list_models. */
HEARTH_CLIENT_API int hearth_client_installed_models(hearth_client* client, char** out_json);

/* ---- several models in one daemon ---------------------------------------------------------- */

/* A hearthd started without --model serves every model in its folder by name
 * (hearth_request_options.model): each is loaded on its first request, within the daemon's
 * memory budget, and unloaded after its keep-alive (5 minutes unless the daemon or a request
 * says otherwise). */

/* The loaded models (GET /api/ps) as a NUL-terminated JSON text: {"models": [{"id",
 * "aliases", "path", "backend", "memory_bytes", "n_ctx", "in_flight", "idle_s",
 * "loaded_at", "loads", "expires_in_s"}]}, each entry with Ollama's fields beside these
 * ("name", "model", "size", "digest", "details", "expires_at", ...; docs/protocol.md; new
 * fields may appear). On success *out_json is malloc'ed (free with hearth_free); on failure
 * it is NULL. A daemon started with --model answers too, listing that model. Errors as for
 * hearth_client_list_models. */
HEARTH_CLIENT_API int hearth_client_loaded_models(hearth_client* client, char** out_json);

/* Loads a model by name before anyone asks (POST /api/load); returns when it is loaded.
 * keep_alive: how long it stays after its last request ("5m", "1h", "-1" for ever; NULL or
 * "" for the daemon's default). HEARTH_ERR_BAD_REQUEST (status 404) for an unknown name;
 * HEARTH_ERR_HTTP with status 507 when it alone exceeds the daemon's memory budget. */
HEARTH_CLIENT_API int hearth_client_load_model(hearth_client* client, const char* model, const char* keep_alive);

/* Unloads a model (POST /api/unload) once its running requests end; a later request loads
 * it again. HEARTH_OK whether or not it was loaded; an unknown name as above. */
HEARTH_CLIENT_API int hearth_client_unload_model(hearth_client* client, const char* model);

/* Asks the daemon whether it is ready (GET /health): HEARTH_OK when it is ready to serve,
 * HEARTH_ERR_UNAVAILABLE while it loads its model or shuts down, HEARTH_ERR_NO_DAEMON when
 * nothing listens, another code on other failures. */
HEARTH_CLIENT_API int hearth_client_health(hearth_client* client);

/* ---- the prompt cache -------------------------------------------------------------------- */

/* hearthd keeps the attention state (KV) of prompt prefixes it has seen, in memory and on
 * disk, so that a prompt starting with a known prefix is answered without recomputing it.
 * hearth_stats says how much of each prompt came from there; these calls look at, clear and
 * fill the cache itself. */

/* The cache's state and counters (GET /api/cache) as a NUL-terminated JSON text:
 *   {"model", "fingerprint",
 *    "memory": {"blocks", "tokens", "bytes", "capacity_bytes", "lookups", "hits",
 *               "hit_tokens", "hit_rate", "evictions"},
 *    "disk": {"enabled", "dir", "entries", "bytes", "budget_bytes", "model_entries",
 *             "model_bytes", "hits", "misses", "hit_rate", "restored_bytes",
 *             "written_chunks", "written_bytes", "evictions", "checksum_failures",
 *             "dropped_writes", "write_errors", "queue_depth", "writing", "stopped_reason", ...},
 *    "prefilled_tokens"}
 * (docs/protocol.md describes every field; new ones may appear). On success *out_json is
 * malloc'ed (free with hearth_free); on failure it is NULL. Errors as for
 * hearth_client_list_models. */
HEARTH_CLIENT_API int hearth_client_cache_stats(hearth_client* client, char** out_json);

/* Forgets cached prompt prefixes, in memory and on disk (DELETE /api/cache): with model NULL
 * or "", those of every model; otherwise those of that model, which must be the loaded one
 * (else HEARTH_ERR_BAD_REQUEST: "does not exist"). Prefixes that running requests use stay
 * in memory until they finish. Blocks until the daemon is done. */
HEARTH_CLIENT_API int hearth_client_cache_clear(hearth_client* client, const char* model);

/* As hearth_client_cache_clear, for the entries of one user id only (DELETE
 * /api/cache?uid=N). Each user's requests have their own entries: a plain clear forgets the
 * caller's; root and the daemon's own user forget everyone's, or with this call one uid's.
 * Naming another uid without being either is refused (HEARTH_ERR_HTTP, status 403). */
HEARTH_CLIENT_API int hearth_client_cache_clear_uid(hearth_client* client, const char* model, unsigned int uid);

/* What hearth_client_cache_warm's text is. */
enum hearth_warm_kind {
  HEARTH_WARM_SYSTEM_PROMPT = 0, /* a chat system message: warms what every chat that starts with it shares */
  HEARTH_WARM_PROMPT = 1         /* a completion prompt, as hearth_client_complete sends it */
};

/* What a warm request did (counts in tokens, times in milliseconds). */
typedef struct hearth_warm_result {
  size_t struct_size;           /* set by hearth_warm_result_init: sizeof(hearth_warm_result) */
  int64_t tokens;               /* tokens of the warmed prefix (BOS and template markup included) */
  int64_t cached_memory_tokens; /* ... already held in memory */
  int64_t cached_disk_tokens;   /* ... restored from disk */
  int64_t prefilled_tokens;     /* ... computed now */
  int64_t chunks_written;       /* chunks handed to the daemon's disk writer */
  double cache_restore_ms;      /* looking up and restoring cached KV (daemon side) */
  double prefill_ms;            /* computing the rest (daemon side) */
  double total_ms;              /* measured by the client: request sent -> answer complete */
  /* Added with the disk-restore figures. */
  int64_t cache_restore_bytes; /* KV bytes read back from the daemon's cache directory */
} hearth_warm_result;

/* Sets struct_size and zeroes every other member. */
HEARTH_CLIENT_API void hearth_warm_result_init(hearth_warm_result* result);

/* Fills the cache with text's prefix (POST /api/cache/warm) without generating anything, so
 * the first real request that starts with it skips its prefill; the daemon also persists it,
 * so it survives a restart. kind is an enum hearth_warm_kind. out may be NULL; otherwise it
 * must be initialised with hearth_warm_result_init. Blocks until the prefix is in the cache
 * (on a CPU, about as long as that prompt's prefill). Errors as for hearth_client_complete. */
HEARTH_CLIENT_API int hearth_client_cache_warm(hearth_client* client, int kind, const char* text,
                                               hearth_warm_result* out);

/* Warms the prefix every chat that continues these n_messages messages starts with (the
 * chat template rendered up to where the next message's content begins). Otherwise as
 * hearth_client_cache_warm. */
HEARTH_CLIENT_API int hearth_client_cache_warm_chat(hearth_client* client, const hearth_message* messages,
                                                    size_t n_messages, hearth_warm_result* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HEARTH_CLIENT_H */
