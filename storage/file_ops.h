// The file system calls the prompt cache makes for its chunk files, behind one small
// interface so tests can inject faults the way SQLite's tests do: fail the Nth write, fsync
// or rename with ENOSPC, EIO or EROFS, then check that the store reported it and that the
// directory and index are still consistent. (sqlite's own I/O goes through sqlite.)
//
// Every member has the POSIX meaning and convention: a result of -1 with errno set on
// failure. The base class makes the real calls; a test overrides the ones it wants to fail.
// Thread-safety: called from the writer thread and from load() callers at the same time.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>

namespace hearth::storage {

class FileOps {
 public:
  virtual ~FileOps() = default;
  virtual int open(const char* path, int flags, mode_t mode);
  virtual ssize_t write(int fd, const void* data, size_t n);
  virtual ssize_t pread(int fd, void* data, size_t n, off_t offset);
  virtual int fstat(int fd, struct stat* st);
  virtual int fsync(int fd);
  virtual int close(int fd);
  virtual int rename(const char* from, const char* to);
  virtual int unlink(const char* path);
  virtual int mkdir(const char* path, mode_t mode);
};

}  // namespace hearth::storage
