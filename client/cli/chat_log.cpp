// The conversation files of `hearth chat` (see chat_log.h).
#include "chat_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

namespace hearth::cli {
namespace {

namespace fs = std::filesystem;

bool valid_role(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant";
}

// Creates the file of a conversation starting now, <dir>/YYYYMMDD-HHMMSS-PID[-N].jsonl (N
// when the process starts another within the second, after /reset), and opens it for
// appending: the descriptor, and its path in *path; -1 (errno set) on failure.
int create_conversation_file(const std::string& dir, std::string* path) {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  const std::string base = dir + "/" + stamp + "-" + std::to_string(::getpid());
  for (int n = 0; n < 1000; ++n) {
    *path = base + (n == 0 ? "" : "-" + std::to_string(n)) + ".jsonl";
    int fd = ::open(path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

}  // namespace

std::string chat_log_dir() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && *state == '/') {
    return std::string(state) + "/hearth/chats";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.local/state/hearth/chats";
  }
  return "";
}

std::string latest_chat_log(const std::string& dir) {
  std::error_code ec;
  std::string best;
  fs::file_time_type best_time{};
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".jsonl" || !it->is_regular_file(ec)) continue;
    fs::file_time_type t = it->last_write_time(ec);
    if (ec) continue;
    // Latest write wins; among equal times, the later name (names start with the time).
    if (best.empty() || t > best_time || (t == best_time && p.string() > best)) {
      best = p.string();
      best_time = t;
    }
  }
  return best;
}

bool read_chat_log(const std::string& path, std::vector<ChatTurn>* turns, size_t* skipped, std::string* error) {
  turns->clear();
  *skipped = 0;
  std::ifstream in(path);
  if (!in) {
    *error = std::strerror(errno);
    return false;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("role") && j["role"].is_string() && j.contains("content") &&
        j["content"].is_string() && valid_role(j["role"].get<std::string>())) {
      turns->push_back({j["role"].get<std::string>(), j["content"].get<std::string>()});
    } else {
      ++*skipped;
    }
  }
  if (in.bad()) {
    *error = "read error";
    return false;
  }
  return true;
}

bool ChatLog::fail(const std::string& what) {
  std::fprintf(stderr, "hearth: warning: cannot save the conversation (%s); going on without saving it\n",
               what.c_str());
  enabled_ = false;
  return false;
}

void ChatLog::append(const std::vector<ChatTurn>& turns) {
  if (!enabled_ || turns.empty()) return;
  std::string text;
  for (const ChatTurn& t : turns) {
    nlohmann::json line = {{"role", t.role}, {"content", t.content}};
    text += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    text += '\n';
  }
  int fd;
  if (path_.empty()) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) {
      fail(dir_ + ": " + ec.message());
      return;
    }
    ::chmod(dir_.c_str(), 0700);  // conversations are private
    fd = create_conversation_file(dir_, &path_);
  } else {
    fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  }
  if (fd < 0) {
    fail(path_ + ": " + std::strerror(errno));
    return;
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      fail(path_ + ": " + std::strerror(err));
      return;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && errno != EINTR) fail(path_ + ": " + std::strerror(errno));
}

}  // namespace hearth::cli
