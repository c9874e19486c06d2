#!/usr/bin/env bash
# The ABI of libhearth_client against its committed baseline, so that an incompatible change
# cannot ship under the same soname (0.1.0 grew the ABI without anyone noticing):
#   1. the soname is the baseline's; a new soname needs a new baseline (--update);
#   2. abidiff (libabigail) finds no difference between the baseline and the built library:
#      functions, and the layout of every public type they reach (hearth_stats,
#      hearth_request_options, ...). A removed function or a changed struct is incompatible:
#      bump the soname (the project's major version). A new function is compatible but
#      must be recorded: update the baseline and the symbols file;
#   3. the exported symbols are exactly those of packaging/debian/libhearth-client.symbols
#      (dpkg-gensymbols), so the package's symbols file is right and each symbol carries the
#      version that added it.
# Usage: abi_test.sh [--update] SOURCE_DIR LIBRARY VERSION
#   LIBRARY: the built libhearth_client.so.X.Y.Z (with debug information: the types come
#   from its DWARF). --update rewrites the baseline (and the symbols file, new symbols
#   getting VERSION) from LIBRARY; review the diff before committing it.
# Exit 77 (skipped) without abidw/abidiff (package abigail-tools) or dpkg-gensymbols.
set -uo pipefail

update=0
if [ "${1:-}" = --update ]; then
  update=1
  shift
fi
src="$(cd "${1:?source dir}" && pwd)"
lib="${2:?library}"
version="${3:?project version}"
baseline="$src/packaging/abi/libhearth_client.abi"
symbols="$src/packaging/debian/libhearth-client.symbols"
# Only the types of the public headers count (the library's internals may change freely).
headers=(--headers-dir "$src/client/include/hearth" --headers-dir "$(dirname "$lib")/include/hearth")
update_cmd="tests/packaging/abi_test.sh --update . $lib $version"

for tool in abidw abidiff dpkg-gensymbols readelf; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/setup)"; exit 77; }
done
[ -f "$lib" ] || { echo "FAIL: $lib missing"; exit 1; }
# Not `grep -q`: it exits at the first match, readelf then dies of SIGPIPE, and pipefail makes
# that a failure (readelf writes the section list in 4 KiB pieces; 2 runs in 500 failed so).
if ! readelf -S "$lib" | grep '\.debug_info' >/dev/null; then
  echo "FAIL: $lib has no debug information: abidw cannot see the types (client/CMakeLists.txt builds it with -g)"
  exit 1
fi
tmp="$(mktemp -d "${TMPDIR:-/tmp}/hearth-abi-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# The ABI as abidw writes it, without what differs between two builds of the same code
# (paths, source lines).
dump() {
  abidw "${headers[@]}" --exported-interfaces-only --drop-private-types --no-corpus-path --no-comp-dir-path --no-show-locs --drop-undefined-syms \
    --type-id-style hash --out-file "$2" "$1"
}
soname_of_lib() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
soname_of_abi() { sed -n "s/.*<abi-corpus [^>]*soname='\([^']*\)'.*/\1/p" "$1" | sed -n 1p; }

# Whether an abidiff report changes structs only by members added after their old end: no
# member moved, removed or retyped, no function removed or changed in signature.
only_appended() {
  grep -q "data member insertion" "$1" || return 1
  grep -qE "data member (change|deletion)|offset changed|[1-9][0-9]* Removed|type of|name of|return type" "$1" &&
    return 1
  awk '/type size changed from/ { old = $5 }
       /, at offset [0-9]+ \(in bits\)/ { match($0, /at offset [0-9]+/);
         if (substr($0, RSTART + 10, RLENGTH - 10) + 0 < old + 0) bad = 1 }
       END { exit bad }' "$1"
}

soname="$(soname_of_lib "$lib")"
package="libhearth-client${soname##*.so.}"  # libhearth_client.so.N -> libhearth-clientN
if [ "$update" = 1 ]; then
  mkdir -p "$(dirname "$baseline")"
  dump "$lib" "$baseline" || { echo "FAIL: abidw $lib"; exit 1; }
  # New symbols get VERSION; with a new soname every symbol is new.
  dpkg-gensymbols -p"$package" -v"$version" -e"$lib" -I"$symbols" -O"$tmp/symbols" -c0 >/dev/null 2>&1
  cp "$tmp/symbols" "$symbols"
  echo "updated $baseline ($soname) and $symbols; review: git diff packaging/"
  exit 0
fi

fails=0
[ -f "$baseline" ] || { echo "FAIL: no baseline $baseline; make it with: $update_cmd"; exit 1; }
base_soname="$(soname_of_abi "$baseline")"
if [ "$soname" != "$base_soname" ]; then
  echo "FAIL: the soname changed ($base_soname -> $soname): an incompatible ABI change may ship now,"
  echo "  and the baseline and the symbols file must describe the new ABI (the package becomes"
  echo "  $package by itself). Update them: $update_cmd"
  exit 1
fi
echo "ok: soname $soname, as the baseline"

dump "$lib" "$tmp/built.abi" || { echo "FAIL: abidw $lib"; exit 1; }
abidiff "$baseline" "$tmp/built.abi" >"$tmp/diff" 2>&1
rc=$?
# abidiff's exit status is a bit field: 1 error, 2 usage, 4 ABI change, 8 incompatible change.
if [ "$rc" -eq 0 ]; then
  echo "ok: abidiff finds the ABI of the baseline"
elif [ $((rc & 3)) -ne 0 ]; then
  cat "$tmp/diff"
  echo "FAIL: abidiff could not compare (exit $rc)"
  fails=$((fails + 1))
else
  cat "$tmp/diff"
  abidiff --no-added-syms "$baseline" "$tmp/built.abi" >/dev/null 2>&1
  if [ $? -eq 0 ]; then
    echo "FAIL: the ABI grew (functions added; compatible under soname $soname). Bump the minor"
    echo "  version (CMakeLists.txt, packaging/debian/changelog) so that the new functions get a"
    echo "  version of their own in the symbols file, then record them: $update_cmd"
  elif only_appended "$tmp/diff"; then
    echo "FAIL: a public struct grew at its end, nothing else changed. That is compatible only for a"
    echo "  struct that begins with struct_size (client.h: old programs pass the old size, and the"
    echo "  library touches only the members that fit) and whose exported *_init() still writes the"
    echo "  old size, the header's *_init() becoming a macro over *_init_sized() (as"
    echo "  hearth_request_options_init in 0.4). If so, record it: $update_cmd"
    echo "  (and a minor version with a changelog entry); otherwise bump the soname."
  else
    echo "FAIL: the ABI of $soname changed incompatibly (see above: a removed function, a changed"
    echo "  struct layout or signature). Either undo the change, or bump the soname (the project's"
    echo "  major version in CMakeLists.txt) and then update the baseline: $update_cmd"
  fi
  fails=$((fails + 1))
fi

# The symbols file of the package: every exported symbol listed, none missing.
if dpkg-gensymbols -p"$package" -v"$version" -e"$lib" -I"$symbols" -O"$tmp/symbols" -c4 >"$tmp/gensymbols" 2>&1; then
  echo "ok: exported symbols match $(basename "$symbols")"
else
  cat "$tmp/gensymbols"
  echo "FAIL: the exported symbols differ from $symbols (new symbols: $update_cmd; lost ones: see above)"
  fails=$((fails + 1))
fi

if [ "$fails" -ne 0 ]; then exit 1; fi
echo "ABI unchanged"
