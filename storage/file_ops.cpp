#include "storage/file_ops.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace hearth::storage {

int FileOps::open(const char* path, int flags, mode_t mode) {
  return ::open(path, flags | O_CLOEXEC, mode);
}
ssize_t FileOps::write(int fd, const void* data, size_t n) {
  return ::write(fd, data, n);
}
ssize_t FileOps::pread(int fd, void* data, size_t n, off_t offset) {
  return ::pread(fd, data, n, offset);
}
int FileOps::fstat(int fd, struct stat* st) {
  return ::fstat(fd, st);
}
int FileOps::fsync(int fd) {
  return ::fsync(fd);
}
int FileOps::close(int fd) {
  return ::close(fd);
}
int FileOps::rename(const char* from, const char* to) {
  return std::rename(from, to);
}
int FileOps::unlink(const char* path) {
  return ::unlink(path);
}
int FileOps::mkdir(const char* path, mode_t mode) {
  return ::mkdir(path, mode);
}

}  // namespace hearth::storage
