#!/bin/sh
# expect_missing_header.sh CXX INCLUDE_ROOT SOURCE HEADER: passes when SOURCE does not
# compile with only INCLUDE_ROOT, because HEADER is not found there.
out=$("$1" -std=c++20 -fsyntax-only -I"$2" "$3" 2>&1)
rc=$?
echo "$out"
if [ $rc -eq 0 ]; then
  echo "FAIL: $3 compiled with only $2 as include root; $4 should be out of its reach"
  exit 1
fi
if ! echo "$out" | grep -q "$4: No such file"; then
  echo "FAIL: $3 failed to compile, but not because $4 was out of reach"
  exit 1
fi
echo "ok: $4 is out of reach of $2"
