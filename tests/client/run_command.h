// Runs a shell command line for the CLI tests and captures its exit status, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "fake_daemon.h"  // TempDir

namespace hearth::test {

struct CommandResult {
  int exit_code = -1;  // -1 when it did not exit normally
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// command is a shell command line (quote its arguments with shell_quote); stdin is
// input (written to a file first).
inline CommandResult run_command(const std::string& command, const std::string& input = "") {
  TempDir dir;
  std::string in = dir.file("in"), out = dir.file("out"), err = dir.file("err");
  std::ofstream(in) << input;
  std::string line = command + " < " + in + " > " + out + " 2> " + err;
  int status = std::system(line.c_str());
  CommandResult r;
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  auto slurp = [](const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace hearth::test
