#!/usr/bin/env bash
# Builds the Debian packages of a build tree (CPack: hearth, libhearth-client<major>,
# libhearth-client-dev), then checks their control data, file lists, modes, conffiles,
# maintainer scripts, the library in the multiarch directory, its shlibs and symbols, that
# the packaged programs print the project version, and lintian (clean but for the overrides
# the README explains); then checks the same layout from `cmake --install --prefix`
# and that a C program builds against it through pkg-config.
# Usage: package_test.sh BUILD_DIR VERSION [LIBDIR]   (LIBDIR: CMAKE_INSTALL_LIBDIR)
# Exit 77 (skipped) without dpkg-deb.
set -uo pipefail

build="$(cd "${1:?build dir}" && pwd)"
version="${2:?project version}"
libdir="${3:-lib}"
major="${version%%.*}"              # the soname's number (SOVERSION)
libpkg="libhearth-client$major"     # the runtime library's package, named after the soname
command -v dpkg-deb >/dev/null || { echo "SKIP: dpkg-deb not installed"; exit 77; }
arch="$(dpkg --print-architecture 2>/dev/null || echo amd64)"

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
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
  local real; real="$(ls "$lib"/libhearth_client.so.$major.* 2>/dev/null | sed -n 1p)"
  [ -n "$real" ] && [ -f "$real" ] && [ ! -L "$real" ] && ok "$(basename "$real")" || fail "$lib/libhearth_client.so.$major.* missing"
  [ -L "$lib/libhearth_client.so.$major" ] && ok "libhearth_client.so.$major symlink" || fail "$lib/libhearth_client.so.$major not a symlink"
  [ -L "$lib/libhearth_client.so" ] && ok "libhearth_client.so symlink" || fail "$lib/libhearth_client.so not a symlink"
  if [ -n "$real" ] && command -v objdump >/dev/null; then
    objdump -p "$real" | grep "SONAME *libhearth_client\.so\.$major\$" >/dev/null && ok "SONAME libhearth_client.so.$major" ||
      fail "SONAME of $real is not libhearth_client.so.$major"
  fi
  for p in client.h client_version.h; do
    [ -f "$root$prefix/include/hearth/$p" ] && ok "include/hearth/$p" || fail "include/hearth/$p missing"
  done
  local pc="$lib/pkgconfig/hearth-client.pc"
  if [ -f "$pc" ]; then
    grep -qx "prefix=$prefix" "$pc" && ok "hearth-client.pc prefix=$prefix" || fail "$pc: prefix is not $prefix: $(head -n1 "$pc")"
    grep -qx "Version: $version" "$pc" && ok "hearth-client.pc Version" || fail "$pc: Version is not $version"
    local pc_libdir; pc_libdir="$(PKG_CONFIG_PATH="$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR= pkg-config --variable=libdir hearth-client 2>&1)"
    [ "$pc_libdir" = "$prefix/$libdir" ] && ok "hearth-client.pc libdir=$pc_libdir" ||
      fail "hearth-client.pc libdir is $pc_libdir, not $prefix/$libdir"
  else
    fail "$pc missing"
  fi
  for p in system/hearthd.service system/hearthd.socket user/hearthd.service user/hearthd.socket; do
    local f="$root$prefix/lib/systemd/$p"
    [ -f "$f" ] && [ "$(mode "$f")" = 644 ] && ok "lib/systemd/$p 0644" || fail "$f missing or not 0644"
  done
  local toml="$root$etc/hearth/hearthd.toml"
  [ -f "$toml" ] && [ "$(mode "$toml")" = 644 ] && ok "$etc/hearth/hearthd.toml 0644" || fail "$toml missing or not 0644"
  for p in man8/hearthd.8.gz man1/hearth.1.gz man1/hearth-run.1.gz man1/hearth-fetch-model.1.gz; do
    local f="$root$prefix/share/man/$p"
    [ -f "$f" ] && gzip -t "$f" 2>/dev/null && ok "man/$p" || fail "$f missing or not gzip"
  done
  for p in hearth "$libpkg" libhearth-client-dev; do
    local d="$root$prefix/share/doc/$p"
    [ -f "$d/copyright" ] && gzip -t "$d/changelog.gz" 2>/dev/null && ok "share/doc/$p: copyright, changelog.gz" ||
      fail "$d: copyright or changelog.gz missing"
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

# --- The packages ------------------------------------------------------------------
main_deb="$build/hearth_${version}_${arch}.deb"
lib_deb="$build/${libpkg}_${version}_${arch}.deb"
dev_deb="$build/libhearth-client-dev_${version}_${arch}.deb"
debs=("$main_deb" "$lib_deb" "$dev_deb")
rm -f "${debs[@]}"
if ! cmake --build "$build" --target package >"$tmp/package.log" 2>&1; then
  cat "$tmp/package.log"; echo "FAIL: cmake --build $build --target package"; exit 1
fi
for deb in "${debs[@]}"; do
  [ -f "$deb" ] || { cat "$tmp/package.log"; ls "$build"/*.deb; echo "FAIL: $deb not produced"; exit 1; }
  ok "built $(basename "$deb")"
done
# The library directory is Debian's multiarch one, from the toolchain (not hard-coded).
if command -v dpkg-architecture >/dev/null; then
  multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)"
  [ "$libdir" = "lib/$multiarch" ] && ok "libdir $libdir (multiarch)" || fail "libdir $libdir is not lib/$multiarch"
fi

field() { dpkg-deb -f "$1" "$2"; }
check_fields() {  # DEB PACKAGE SECTION
  [ "$(field "$1" Package)" = "$2" ] && ok "Package: $2" || fail "Package: $(field "$1" Package), not $2"
  [ "$(field "$1" Version)" = "$version" ] && ok "$2 Version: $version" || fail "$2 Version: $(field "$1" Version) != $version"
  [ "$(field "$1" Architecture)" = "$arch" ] && ok "$2 Architecture: $arch" || fail "$2 Architecture: $(field "$1" Architecture)"
  [ "$(field "$1" Section)" = "$3" ] && ok "$2 Section: $3" || fail "$2 Section: $(field "$1" Section), not $3"
}
check_fields "$main_deb" hearth utils
check_fields "$lib_deb" "$libpkg" libs
check_fields "$dev_deb" libhearth-client-dev libdevel
depends="$(field "$main_deb" Depends)"
echo "hearth Depends: $depends"
for d in libsystemd0 libstdc++6 libc6 python3-pip "$libpkg (= $version)"; do
  [[ "$depends" == *"$d"* ]] && ok "hearth Depends has $d" || fail "hearth Depends lacks $d"
done
lib_depends="$(field "$lib_deb" Depends)"
echo "$libpkg Depends: $lib_depends"
[[ "$lib_depends" == *libc6* && "$lib_depends" != *libsystemd* ]] && ok "$libpkg Depends: libc6, no daemon libraries" ||
  fail "$libpkg Depends: $lib_depends"
[ "$(field "$dev_deb" Depends)" = "$libpkg (= $version)" ] && ok "libhearth-client-dev Depends: $libpkg (= $version)" ||
  fail "libhearth-client-dev Depends: $(field "$dev_deb" Depends)"

# Which package holds what: the runtime library alone in libhearth-client<major>, the .so link,
# header and .pc in -dev, nothing of the library in hearth.
contents() { dpkg-deb -c "$1" | awk '{print $6}' | sed 's|^\./|/|'; }
contents "$main_deb" > "$tmp/main.list"
contents "$lib_deb" > "$tmp/lib.list"
contents "$dev_deb" > "$tmp/dev.list"
grep -q "libhearth_client\|/include/" "$tmp/main.list" && fail "hearth holds library files: $(grep "libhearth_client\|/include/" "$tmp/main.list")" ||
  ok "hearth holds no library files"
[ "$(grep -c "^/usr/$libdir/libhearth_client\.so\.$major" "$tmp/lib.list")" = 2 ] && ! grep -q "\.so$\|/include/\|pkgconfig" "$tmp/lib.list" &&
  ok "$libpkg: /usr/$libdir/libhearth_client.so.$major{,.*} only" || fail "$libpkg holds: $(cat "$tmp/lib.list")"
for f in "/usr/$libdir/libhearth_client.so" /usr/include/hearth/client.h "/usr/$libdir/pkgconfig/hearth-client.pc"; do
  grep -qx "$f" "$tmp/dev.list" && ok "libhearth-client-dev has $f" || fail "libhearth-client-dev lacks $f"
done

for deb in "${debs[@]}"; do
  # Ownership in the archive: root:root everywhere.
  if dpkg-deb -c "$deb" | awk '$2 != "root/root" {bad=1} END {exit bad}'; then ok "$(basename "$deb"): all files root/root"
  else fail "$(basename "$deb"): files not owned by root/root"; fi
done

ctl="$tmp/control"
dpkg-deb -e "$main_deb" "$ctl"
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
lctl="$tmp/lib-control"
dpkg-deb -e "$lib_deb" "$lctl"
grep -qx "activate-noawait ldconfig" "$lctl/triggers" 2>/dev/null && ok "$libpkg: ldconfig trigger" || fail "$libpkg: no ldconfig trigger"
grep -qx "libhearth_client $major $libpkg (>= $version)" "$lctl/shlibs" 2>/dev/null && ok "shlibs: $(cat "$lctl/shlibs")" ||
  fail "shlibs missing or wrong: $(cat "$lctl/shlibs" 2>/dev/null)"
cmp -s "$lctl/symbols" "$src/packaging/debian/libhearth-client.symbols" && [ "$(mode "$lctl/symbols")" = 644 ] &&
  ok "symbols: packaging/debian/libhearth-client.symbols" || fail "DEBIAN/symbols missing or not the committed one"

# lintian: no error or warning but those overridden in the packages (README, "Installing",
# says why each). The default Maintainer is a placeholder at localhost (a build for this
# machine; -DHEARTH_PACKAGE_MAINTAINER= sets a real one): its bogus-mail-host tags are
# accepted only while it is the placeholder.
if [ "${HEARTH_PACKAGE_LINTIAN:-1}" = 0 ]; then
  echo "note: lintian not run (HEARTH_PACKAGE_LINTIAN=0: a sanitizer build)"
elif command -v lintian >/dev/null; then
  suppress=()
  if [[ "$(field "$main_deb" Maintainer)" == *@localhost\> ]]; then
    suppress=(--suppress-tags bogus-mail-host,bogus-mail-host-in-debian-changelog)
  fi
  if lintian --fail-on error,warning --display-info --tag-display-limit 0 "${suppress[@]}" "${debs[@]}" \
      >"$tmp/lintian" 2>&1; then
    ok "lintian: no errors or warnings${suppress:+ (placeholder Maintainer: bogus-mail-host not counted)}"
    grep -v "^running with root" "$tmp/lintian" | sed 's/^/  lintian: /'
  else
    cat "$tmp/lintian"; fail "lintian found errors or warnings (README, \"Installing\", lists the accepted ones)"
  fi
else
  echo "note: lintian not installed (scripts/setup installs it); not run"
fi

root="$tmp/root"
for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$root"; done
echo "--- package layout (the three packages unpacked together)"
check_layout "$root" /usr /etc

# --- cmake --install into a prefix (a source build) -------------------------------------
echo "--- cmake --install --prefix"
prefix="$tmp/prefix"
if cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
  check_layout "" "$prefix" "$prefix/etc"
  # A C program builds and runs against the install through its pkg-config file.
  if command -v cc >/dev/null && command -v pkg-config >/dev/null; then
    export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
    if cc -std=c99 -o "$tmp/ask" "$src/client/examples/ask.c" $(pkg-config --cflags --libs hearth-client) 2>"$tmp/cc.log"; then
      deps="$(LD_LIBRARY_PATH="$prefix/$libdir" ldd "$tmp/ask")"
      grep -q "libhearth_client.so.$major => $prefix/$libdir/" <<<"$deps" &&
        ok "examples/ask.c builds with pkg-config hearth-client and loads $prefix/$libdir/libhearth_client.so.$major" ||
        fail "ask does not load the installed library: $deps"
    else
      cat "$tmp/cc.log"; fail "examples/ask.c does not build with pkg-config hearth-client"
    fi
    unset PKG_CONFIG_PATH
  fi
else
  cat "$tmp/install.log"; fail "cmake --install $build --prefix $prefix"
fi

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all package checks passed"
