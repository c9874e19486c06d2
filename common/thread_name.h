// Names the calling thread as ps -L, top -H, gdb and perf show it ("hearth-engine",
// "hearth-io", ...). Linux keeps 15 bytes of a name; longer names are cut there.
#pragma once

#include <pthread.h>

#include <string>

namespace hearth {

inline void set_thread_name(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace hearth
