/* ask: streams hearthd's answer to the question given on the command line.
 *
 *   cc -std=c99 ask.c $(pkg-config --cflags --libs hearth-client) -o ask
 *   ./ask "Why is the sky blue?"
 *
 * The socket is discovered as hearth_client_open documents ($HEARTH_SOCKET, ...). Exit
 * status: 0 answered, 1 usage or request error, 2 no daemon. */
#include <stdio.h>
#include <string.h>

#include "hearth/client.h"

/* Prints each piece of the answer as it arrives. */
static int print_piece(const char* piece, size_t len, void* user_data) {
  (void)user_data;
  fwrite(piece, 1, len, stdout);
  fflush(stdout);
  return 0; /* non-zero would abort the request (HEARTH_ERR_CANCELLED) */
}

int main(int argc, char** argv) {
  hearth_client* client = NULL;
  hearth_message message;
  hearth_request_options options;
  hearth_stats stats;
  int rc;

  if (argc != 2) {
    fprintf(stderr, "usage: %s \"question\"\n", argv[0]);
    return 1;
  }
  if (strcmp(HEARTH_CLIENT_VERSION, hearth_client_version()) != 0) {
    fprintf(stderr, "warning: built with libhearth-client %s, running with %s\n", HEARTH_CLIENT_VERSION,
            hearth_client_version());
  }
  rc = hearth_client_open(NULL, &client);
  if (rc != HEARTH_OK) {
    fprintf(stderr, "hearth_client_open: %s\n", hearth_strerror(rc));
    return 1;
  }

  message.role = "user";
  message.content = argv[1];
  hearth_request_options_init(&options);
  options.max_tokens = 256;
  hearth_stats_init(&stats);

  rc = hearth_client_chat(client, &message, 1, &options, print_piece, NULL, NULL, &stats);
  if (rc == HEARTH_OK) {
    printf("\n");
    fprintf(stderr, "[%lld prompt tokens, %lld generated, first token after %.1f ms, %.1f tok/s]\n",
            (long long)stats.prompt_tokens, (long long)stats.completion_tokens, stats.ttft_ms, stats.decode_tok_s);
  } else {
    fprintf(stderr, "error: %s: %s\n", hearth_strerror(rc), hearth_client_last_error(client));
  }
  hearth_client_close(client);
  if (rc == HEARTH_ERR_NO_DAEMON) return 2;
  return rc == HEARTH_OK ? 0 : 1;
}
