/* tools: one round of tool use with libhearth-client. The model is offered a get_weather
 * function; each call it makes is "run" here (a made-up forecast), the results go back as
 * tool messages, and the model's answer is printed.
 *
 *   cc -std=c99 tools.c $(pkg-config --cflags --libs hearth-client) -o tools
 *   ./tools "What is the weather in Paris?"
 *
 * Exit status: 0 answered, 1 usage or request error, 2 no daemon. */
#include <stdio.h>
#include <string.h>

#include "hearth/client.h"

#define MAX_CALLS 8

static const char* const kTools =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
    " \"description\": \"Get the current weather in a city\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}},"
    " \"required\": [\"city\"]}}}]";

static int print_piece(const char* piece, size_t len, void* user_data) {
  (void)user_data;
  fwrite(piece, 1, len, stdout);
  fflush(stdout);
  return 0;
}

static int fail(hearth_client* client, int rc) {
  fprintf(stderr, "%s: %s\n", hearth_strerror(rc), hearth_client_last_error(client));
  hearth_client_close(client);
  return rc == HEARTH_ERR_NO_DAEMON ? 2 : 1;
}

int main(int argc, char** argv) {
  hearth_client* client = NULL;
  hearth_chat_message messages[2 + MAX_CALLS];
  hearth_request_options options;
  hearth_tool_call* calls = NULL;
  size_t n_calls = 0, n_messages = 0, i;
  int rc;

  if (argc != 2) {
    fprintf(stderr, "usage: %s \"question\"\n", argv[0]);
    return 1;
  }
  rc = hearth_client_open(NULL, &client);
  if (rc != HEARTH_OK) return fail(client, rc);

  hearth_chat_message_init(&messages[n_messages]);
  messages[n_messages].role = "user";
  messages[n_messages++].content = argv[1];
  hearth_request_options_init(&options);
  options.temperature = 0;
  options.max_tokens = 256;
  options.tools = kTools;

  /* Turn 1: the model may answer, or call get_weather (the calls come back whole). */
  rc = hearth_client_chat_v2(client, messages, n_messages, &options, print_piece, NULL, NULL, &calls, &n_calls, NULL);
  if (rc != HEARTH_OK) return fail(client, rc);
  if (n_calls == 0) {
    printf("\n");
    hearth_client_close(client);
    return 0;
  }
  if (n_calls > MAX_CALLS) n_calls = MAX_CALLS;

  /* Turn 2: the assistant's calls as it made them, then one result for each. */
  hearth_chat_message_init(&messages[n_messages]);
  messages[n_messages].role = "assistant";
  messages[n_messages].tool_calls = calls;
  messages[n_messages++].n_tool_calls = n_calls;
  for (i = 0; i < n_calls; ++i) {
    printf("[%s(%s)]\n", calls[i].name, calls[i].arguments);
    hearth_chat_message_init(&messages[n_messages]);
    messages[n_messages].role = "tool";
    messages[n_messages].tool_call_id = calls[i].id;
    messages[n_messages++].content = "{\"celsius\": 18, \"sky\": \"clear\"}";
  }
  options.tool_choice = "none"; /* an answer in words this time */
  rc = hearth_client_chat_v2(client, messages, n_messages, &options, print_piece, NULL, NULL, NULL, NULL, NULL);
  hearth_free(calls); /* the messages pointed into it until here */
  if (rc != HEARTH_OK) return fail(client, rc);
  printf("\n");
  hearth_client_close(client);
  return 0;
}
