// Compiled with only the ipc layer's include root: the server asks the daemon's ModelPuller
// (ipc/model_puller.h) for a download; the downloader itself, beside ipc, is out of reach.
#include "fetch/pull.h"
#include "ipc/model_puller.h"

int main() {
  return 0;
}
