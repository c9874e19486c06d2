// Where `hearth chat` keeps its conversations: one JSON-lines file per conversation under
// $XDG_STATE_HOME/hearth/chats/ (else ~/.local/state/hearth/chats/), one message a line:
//   {"role":"user","content":"Why is the sky blue?"}
//   {"role":"assistant","content":"Because ..."}
// A file is created at the first answered turn and grows by each answered turn (the user's
// message and the answer, appended together). `hearth chat --continue` reads back the file
// written last. Saving is best effort: a failure prints one warning and the chat goes on
// unsaved.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hearth::cli {

struct ChatTurn {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// The folder of conversation files; "" when neither XDG_STATE_HOME nor HOME is set.
std::string chat_log_dir();

// The conversation file written last in dir (latest modification time), or "" when there
// is none.
std::string latest_chat_log(const std::string& dir);

// Reads a conversation file's turns. Lines that are not a message (a line cut short by a
// crash or a full disk) are skipped and counted in *skipped. false, with *error, when the
// file cannot be read.
bool read_chat_log(const std::string& path, std::vector<ChatTurn>* turns, size_t* skipped, std::string* error);

class ChatLog {
 public:
  // dir "" (or enabled false): nothing is saved.
  ChatLog(std::string dir, bool enabled) : dir_(std::move(dir)), enabled_(enabled && !dir_.empty()) {}

  // Appends to this existing file from now on (--continue).
  void continue_file(const std::string& path) { path_ = path; }
  // The next append creates a new file (after /reset).
  void start_new() { path_.clear(); }
  // Appends turns to the conversation's file (mode 0600, in a 0700 folder), creating both
  // when needed. On the first failure: a warning on stderr, and nothing is saved after it.
  void append(const std::vector<ChatTurn>& turns);

  const std::string& path() const { return path_; }

 private:
  bool fail(const std::string& what);

  std::string dir_;
  bool enabled_;
  std::string path_;  // "" until the first append of a conversation
};

}  // namespace hearth::cli
