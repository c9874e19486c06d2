#!/bin/sh
# Catch2 test names that CTest cannot run: a ';' in a TEST_CASE name splits it into two
# tests that match nothing, and both fail. Usage: test_names.sh SOURCE_DIR/tests
if grep -rnE 'TEST_CASE\("[^"]*;' "$1"; then
  echo "test_names: the TEST_CASE names above contain ';' (CTest splits them): use ',' instead" >&2
  exit 1
fi
