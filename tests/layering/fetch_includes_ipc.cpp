// Compiled with only the fetch layer's include root: the downloader sits beside ipc and below
// the daemon; it may use the engine (the GGUF reader) but not the server.
#include "engine/gguf/gguf.h"
#include "fetch/pull.h"
#include "ipc/server.h"

int main() {
  return 0;
}
