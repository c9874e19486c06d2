/* Compiled as strict C99 (-std=c99 -pedantic -Werror): proves hearth/client.h is C. The
 * C++ tests call these functions through extern "C". */
#include "header_c99.h"

#include <string.h>

#include "hearth/client.h"

static int count_bytes(const char* piece, size_t len, void* user_data) {
  (void)piece;
  *(size_t*)user_data += len;
  return 0;
}

int hearth_test_c99_version_major(void) {
  return HEARTH_CLIENT_VERSION_MAJOR;
}
int hearth_test_c99_version_minor(void) {
  return HEARTH_CLIENT_VERSION_MINOR;
}
int hearth_test_c99_version_patch(void) {
  return HEARTH_CLIENT_VERSION_PATCH;
}
const char* hearth_test_c99_version_string(void) {
  return HEARTH_CLIENT_VERSION;
}

int hearth_test_c99_defaults_ok(void) {
  hearth_request_options options;
  hearth_stats stats;
  hearth_text_callback callback = count_bytes;
  size_t n = 0;
  hearth_request_options_init(&options);
  hearth_stats_init(&stats);
  callback("abc", 3, &n);
  return options.struct_size == sizeof(options) && stats.struct_size == sizeof(stats) && options.model == NULL &&
         options.temperature < 0 && stats.finish_reason == HEARTH_FINISH_NONE && n == 3 &&
         strcmp(hearth_strerror(HEARTH_OK), "success") == 0;
}

int hearth_test_c99_cache_defaults_ok(void) {
  hearth_warm_result result;
  hearth_stats stats;
  hearth_warm_result_init(&result);
  hearth_stats_init(&stats);
  return result.struct_size == sizeof(result) && result.tokens == 0 && result.total_ms == 0 &&
         stats.cached_memory_tokens == 0 && stats.prefilled_tokens == 0 && HEARTH_WARM_SYSTEM_PROMPT == 0 &&
         HEARTH_WARM_PROMPT == 1;
}

int hearth_test_c99_cache_no_daemon(const char* socket_path) {
  hearth_client* client = NULL;
  char* json = NULL;
  hearth_warm_result result;
  int rc = hearth_client_open(socket_path, &client);
  if (rc != HEARTH_OK) return rc;
  hearth_client_set_connect_retry(client, 0); /* no daemon is expected: do not wait for one */
  hearth_warm_result_init(&result);
  rc = hearth_client_cache_stats(client, &json);
  if (rc == HEARTH_ERR_NO_DAEMON) rc = hearth_client_cache_clear(client, NULL);
  if (rc == HEARTH_ERR_NO_DAEMON) rc = hearth_client_cache_warm(client, HEARTH_WARM_SYSTEM_PROMPT, "hi", &result);
  hearth_free(json);
  hearth_client_close(client);
  return rc;
}

int hearth_test_c99_ask_no_daemon(const char* socket_path) {
  hearth_client* client = NULL;
  hearth_message message;
  char* text = NULL;
  int rc = hearth_client_open(socket_path, &client);
  if (rc != HEARTH_OK) return rc;
  if (hearth_client_set_connect_retry(client, 0) != HEARTH_OK || hearth_client_set_timeout(client, 1000) != HEARTH_OK) {
    hearth_client_close(client);
    return HEARTH_ERR_INTERNAL;
  }
  message.role = "user";
  message.content = "hello";
  rc = hearth_client_chat(client, &message, 1, NULL, NULL, NULL, &text, NULL);
  hearth_free(text);
  hearth_client_close(client);
  return rc;
}

int hearth_test_c99_tools_defaults_ok(void) {
  hearth_request_options options;
  hearth_chat_message message;
  hearth_tool_call call = {"call_1", "get_weather", "{\"city\": \"Paris\"}"};
  hearth_chat_message conversation[3] = {
      {.struct_size = sizeof(hearth_chat_message), .role = "user", .content = "Weather in Paris?"},
      {.struct_size = sizeof(hearth_chat_message), .role = "assistant", .content = NULL},
      {.struct_size = sizeof(hearth_chat_message), .role = "tool", .content = "18 C"}};
  conversation[1].tool_calls = &call;
  conversation[1].n_tool_calls = 1;
  conversation[2].tool_call_id = call.id;
  hearth_request_options_init(&options);
  hearth_chat_message_init(&message);
  return options.tools == NULL && options.tool_choice == NULL && options.parallel_tool_calls < 0 &&
         options.response_format == HEARTH_FORMAT_TEXT && options.json_schema == NULL &&
         options.json_schema_strict == 0 && message.struct_size == sizeof(message) && message.role == NULL &&
         message.tool_calls == NULL && message.n_tool_calls == 0 && message.tool_call_id == NULL &&
         conversation[0].tool_calls == NULL && conversation[2].n_tool_calls == 0 && HEARTH_FINISH_TOOL_CALLS == 4 &&
         HEARTH_FORMAT_JSON_SCHEMA == 2;
}

int hearth_test_c99_tools_no_daemon(const char* socket_path) {
  hearth_client* client = NULL;
  hearth_chat_message message;
  hearth_request_options options;
  hearth_tool_call* calls = NULL;
  size_t n_calls = 0;
  int rc = hearth_client_open(socket_path, &client);
  if (rc != HEARTH_OK) return rc;
  hearth_client_set_connect_retry(client, 0);
  hearth_chat_message_init(&message);
  message.role = "user";
  message.content = "Weather in Paris?";
  hearth_request_options_init(&options);
  options.tools = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}]";
  options.tool_choice = "required";
  rc = hearth_client_chat_v2(client, &message, 1, &options, NULL, NULL, NULL, &calls, &n_calls, NULL);
  hearth_free(calls);
  hearth_client_close(client);
  return rc;
}

static int c99_reasoning_piece(const char* piece, size_t len, void* user_data) {
  (void)piece;
  *(size_t*)user_data += len;
  return 0;
}

int hearth_test_c99_reasoning_defaults_ok(void) {
  hearth_request_options options;
  size_t seen = 0;
  int defaults;
  hearth_request_options_init(&options);
  defaults = options.on_reasoning == NULL && options.thinking == HEARTH_THINKING_DEFAULT &&
             options.thinking_budget_tokens == 0 && HEARTH_THINKING_OFF == 1 && HEARTH_THINKING_ON == 2;
  options.on_reasoning = c99_reasoning_piece;
  options.thinking = HEARTH_THINKING_ON;
  options.thinking_budget_tokens = 128;
  return defaults && options.on_reasoning("abc", 3, &seen) == 0 && seen == 3;
}
