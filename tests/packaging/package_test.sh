#!/usr/bin/env bash
# Builds the Debian package of a build tree (CPack), then checks its control data, file
# list, modes, conffiles, maintainer scripts and that the packaged programs print the
# project version; then checks the same layout from `cmake --install --prefix`.
# Usage: package_test.sh BUILD_DIR VERSION [LIBDIR]   (LIBDIR: CMAKE_INSTALL_LIBDIR)
# Exit 77 (skipped) without dpkg-deb.
set -uo pipefail

build="$(cd "${1:?build dir}" && pwd)"
version="${2:?project version}"
libdir="${3:-lib}"
command -v dpkg-deb >/dev/null || { echo "SKIP: dpkg-deb not installed"; exit 77; }
arch="$(dpkg --print-architecture 2>/dev/null || echo amd64)"

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
tmp="$(mktemp -d "${TMPDIR:-/tmp}/hearth-pkg-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# Sanitizer builds: the packaged programs are ASan builds; leaks at exit are not the point.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# mode PATH -> octal permission bits
mode() { stat -c %a "$1"; }

# check_layout ROOT PREFIX ETC: the files every install has, under ROOT.
check_layout() {
  local root="$1" prefix="$2" etc="$3" p
  for p in hearthd hearth hearth-run hearth-fetch-model; do
    local f="$root$prefix/bin/$p"
    if [ -f "$f" ] && [ -x "$f" ] && [ "$(mode "$f")" = 755 ]; then ok "bin/$p 0755"
    else fail "$f missing or not 0755 ($( [ -e "$f" ] && mode "$f"))"; fi
  done
  [ -f "$root$prefix/share/hearth/models.tsv" ] && ok "models.tsv" ||
    fail "share/hearth/models.tsv missing"
  # The installed fetch tool finds its catalog next to it (<prefix>/share/hearth).
  # Captured first: under pipefail, grep -q closing the pipe early would fail the check
  # by chance (SIGPIPE in the writer).
  local listing; listing="$("$root$prefix/bin/hearth-fetch-model" --list 2>&1)"
  grep -q "qwen2.5-coder:0.5b" <<<"$listing" && ok "hearth-fetch-model --list" ||
    fail "hearth-fetch-model --list does not list the catalog: $listing"
  local lib="$root$prefix/$libdir"
  local real; real="$(ls "$lib"/libhearth_client.so.0.* 2>/dev/null | head -n1)"
  [ -n "$real" ] && [ -f "$real" ] && [ ! -L "$real" ] && ok "$(basename "$real")" || fail "$lib/libhearth_client.so.0.* missing"
  [ -L "$lib/libhearth_client.so.0" ] && ok "libhearth_client.so.0 symlink" || fail "$lib/libhearth_client.so.0 not a symlink"
  [ -L "$lib/libhearth_client.so" ] && ok "libhearth_client.so symlink" || fail "$lib/libhearth_client.so not a symlink"
  if [ -n "$real" ] && command -v objdump >/dev/null; then
    objdump -p "$real" | grep 'SONAME *libhearth_client\.so\.0$' >/dev/null && ok "SONAME libhearth_client.so.0" ||
      fail "SONAME of $real is not libhearth_client.so.0"
  fi
  for p in client.h client_version.h; do
    [ -f "$root$prefix/include/hearth/$p" ] && ok "include/hearth/$p" || fail "include/hearth/$p missing"
  done
  local pc="$lib/pkgconfig/hearth-client.pc"
  if [ -f "$pc" ]; then
    grep -qx "prefix=$prefix" "$pc" && ok "hearth-client.pc prefix=$prefix" || fail "$pc: prefix is not $prefix: $(head -n1 "$pc")"
    grep -qx "Version: $version" "$pc" && ok "hearth-client.pc Version" || fail "$pc: Version is not $version"
  else
    fail "$pc missing"
  fi
  for p in system/hearthd.service system/hearthd.socket user/hearthd.service user/hearthd.socket; do
    local f="$root$prefix/lib/systemd/$p"
    [ -f "$f" ] && [ "$(mode "$f")" = 644 ] && ok "lib/systemd/$p 0644" || fail "$f missing or not 0644"
  done
  local toml="$root$etc/hearth/hearthd.toml"
  [ -f "$toml" ] && [ "$(mode "$toml")" = 644 ] && ok "$etc/hearth/hearthd.toml 0644" || fail "$toml missing or not 0644"
  for p in man8/hearthd.8.gz man1/hearth.1.gz man1/hearth-run.1.gz; do
    local f="$root$prefix/share/man/$p"
    [ -f "$f" ] && gzip -t "$f" 2>/dev/null && ok "man/$p" || fail "$f missing or not gzip"
  done
  # Nothing users do not need: no static libraries, no test programs.
  local extra; extra="$(find "$root$prefix" \( -name '*.a' -o -name '*_test*' -o -name 'test_*' \) -print)"
  [ -z "$extra" ] && ok "no static libs or tests" || fail "unexpected files: $extra"
  # The programs run from there and say the project version.
  local out
  out="$(LD_LIBRARY_PATH="$lib" "$root$prefix/bin/hearthd" --version 2>&1)"
  [[ "$out" == *"$version"* ]] && ok "hearthd --version: $out" || fail "hearthd --version: $out"
  out="$(LD_LIBRARY_PATH="$lib" "$root$prefix/bin/hearth" --version 2>&1)"
  [[ "$out" == *"hearth $version"* && "$out" == *"libhearth-client $version"* ]] && ok "hearth --version: $out" ||
    fail "hearth --version: $out"
  out="$(LD_LIBRARY_PATH="$lib" "$root$prefix/bin/hearth-run" --version 2>&1)"
  [[ "$out" == *"$version"* ]] && ok "hearth-run --version: $out" || fail "hearth-run --version: $out"
}

# --- The package ---------------------------------------------------------------------
deb="$build/hearth_${version}_${arch}.deb"
rm -f "$deb"
if ! cmake --build "$build" --target package >"$tmp/package.log" 2>&1; then
  cat "$tmp/package.log"; echo "FAIL: cmake --build $build --target package"; exit 1
fi
[ -f "$deb" ] || { cat "$tmp/package.log"; echo "FAIL: $deb not produced"; exit 1; }
ok "built $(basename "$deb")"

field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = hearth ] && ok "Package: hearth" || fail "Package: $(field Package)"
[ "$(field Version)" = "$version" ] && ok "Version: $version" || fail "Version: $(field Version) != $version"
[ "$(field Architecture)" = "$arch" ] && ok "Architecture: $arch" || fail "Architecture: $(field Architecture)"
depends="$(field Depends)"
echo "Depends: $depends"
for d in libsystemd0 libstdc++6 libc6 python3-pip; do
  [[ "$depends" == *"$d"* ]] && ok "Depends has $d" || fail "Depends lacks $d"
done
dpkg-deb -c "$deb" > "$tmp/contents"

ctl="$tmp/control"
dpkg-deb -e "$deb" "$ctl"
if [ -f "$ctl/conffiles" ] && grep -qx /etc/hearth/hearthd.toml "$ctl/conffiles"; then ok "conffiles: /etc/hearth/hearthd.toml"
else fail "/etc/hearth/hearthd.toml is not in conffiles"; fi
for s in postinst prerm postrm; do
  f="$ctl/$s"
  if [ -f "$f" ] && [ "$(mode "$f")" = 755 ] && sh -n "$f"; then ok "maintainer script $s (0755, sh -n)"
  else fail "maintainer script $s missing, not 0755 or not valid sh"; fi
done
if grep -q adduser "$ctl/postinst" 2>/dev/null; then
  [[ "$depends" == *adduser* ]] && ok "Depends has adduser (postinst uses it)" || fail "postinst uses adduser, Depends lacks it"
fi
grep -qx "activate-noawait ldconfig" "$ctl/triggers" 2>/dev/null && ok "ldconfig trigger" || fail "no ldconfig trigger"
[ -f "$ctl/shlibs" ] && grep -q "^libhearth_client 0 hearth" "$ctl/shlibs" && ok "shlibs: $(cat "$ctl/shlibs")" ||
  fail "shlibs missing or wrong"
# Ownership in the archive: root:root everywhere.
if awk '$2 != "root/root" {bad=1} END {exit bad}' "$tmp/contents"; then ok "all files root/root"
else fail "files not owned by root/root"; fi

root="$tmp/root"
dpkg-deb -x "$deb" "$root"
echo "--- package layout"
check_layout "$root" /usr /etc

# --- cmake --install into a prefix (a source build) -------------------------------------
echo "--- cmake --install --prefix"
prefix="$tmp/prefix"
if cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
  check_layout "" "$prefix" "$prefix/etc"
else
  cat "$tmp/install.log"; fail "cmake --install $build --prefix $prefix"
fi

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all package checks passed"
