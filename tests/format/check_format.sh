#!/bin/sh
# Every C and C++ file git tracks is formatted as .clang-format says: clang-format
# --dry-run -Werror, which names each file and line that differs. scripts/format fixes them.
# The format is clang-format 14's (Debian 12, which scripts/setup installs); another major
# version formats some constructs differently, so the check skips (77) there, and without
# clang-format or a git checkout.
set -eu
cd "$1"
if ! command -v clang-format >/dev/null 2>&1; then echo "clang-format is not installed: skipped"; exit 77; fi
if ! clang-format --version | grep -q "version 14\."; then
  echo "$(clang-format --version): the format is clang-format 14's; skipped"
  exit 77
fi
if ! git rev-parse --git-dir >/dev/null 2>&1; then echo "not a git checkout: skipped"; exit 77; fi
git ls-files -z -- '*.c' '*.cpp' '*.h' '*.inc' | xargs -0 clang-format --dry-run -Werror
