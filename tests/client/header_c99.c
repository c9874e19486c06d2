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
