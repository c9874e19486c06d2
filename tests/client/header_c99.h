/* Functions of header_c99.c (compiled as C99), called from the C++ tests. */
#ifndef HEARTH_TEST_HEADER_C99_H
#define HEARTH_TEST_HEADER_C99_H
#ifdef __cplusplus
extern "C" {
#endif
int hearth_test_c99_version_major(void);
int hearth_test_c99_version_minor(void);
int hearth_test_c99_version_patch(void);
const char* hearth_test_c99_version_string(void);
/* 1 when the *_init functions and a callback behave as documented, from C. */
int hearth_test_c99_defaults_ok(void);
/* 1 when hearth_warm_result_init and the cache members of hearth_stats work from C. */
int hearth_test_c99_cache_defaults_ok(void);
/* Opens socket_path and calls cache stats, clear and warm; returns the last status. */
int hearth_test_c99_cache_no_daemon(const char* socket_path);
/* Opens socket_path and sends one non-streamed chat; returns the status. */
int hearth_test_c99_ask_no_daemon(const char* socket_path);
/* 1 when the 0.4 members of hearth_request_options and hearth_chat_message_init have their
 * defaults, and a message array with tool calls initialises as the header shows, from C. */
int hearth_test_c99_tools_defaults_ok(void);
/* Opens socket_path and sends a chat with tools through hearth_client_chat_v2; returns the
 * status. */
int hearth_test_c99_tools_no_daemon(const char* socket_path);
/* 1 when the 0.5 members of hearth_request_options (on_reasoning, thinking,
 * thinking_budget_tokens) have their defaults and take a C callback. */
int hearth_test_c99_reasoning_defaults_ok(void);
#ifdef __cplusplus
}
#endif
#endif
