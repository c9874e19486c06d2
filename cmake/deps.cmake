# The libraries Debian does not package, built by scripts/build-deps from their PyPI source
# distributions into HEARTH_DEPS_DIR (default: $XDG_CACHE_HOME/hearth/deps, else
# ~/.cache/hearth/deps, as scripts/build-deps writes them).
if(DEFINED ENV{HEARTH_DEPS_DIR})
  set(_hearth_deps_default "$ENV{HEARTH_DEPS_DIR}")
elseif(DEFINED ENV{XDG_CACHE_HOME})
  set(_hearth_deps_default "$ENV{XDG_CACHE_HOME}/hearth/deps")
else()
  set(_hearth_deps_default "$ENV{HOME}/.cache/hearth/deps")
endif()
set(HEARTH_DEPS_DIR "${_hearth_deps_default}" CACHE PATH "Where scripts/build-deps installs xgrammar")

# xgrammar: grammars and token masks for constrained decoding (engine/sampling/grammar.cpp
# alone includes it). A static library: the daemon and the packages carry it inside.
set(_xgrammar_prefix "${HEARTH_DEPS_DIR}/xgrammar-0.2.8")
find_path(HEARTH_XGRAMMAR_INCLUDE_DIR xgrammar/xgrammar.h HINTS "${_xgrammar_prefix}/include" NO_DEFAULT_PATH)
find_library(HEARTH_XGRAMMAR_LIBRARY NAMES libxgrammar.a HINTS "${_xgrammar_prefix}/lib" NO_DEFAULT_PATH)
if(NOT HEARTH_XGRAMMAR_INCLUDE_DIR OR NOT HEARTH_XGRAMMAR_LIBRARY)
  message(FATAL_ERROR "xgrammar 0.2.8 not found in ${_xgrammar_prefix}: run scripts/setup "
                      "(scripts/build-deps builds it), or set HEARTH_DEPS_DIR")
endif()
add_library(hearth_xgrammar STATIC IMPORTED)
set_target_properties(hearth_xgrammar PROPERTIES IMPORTED_LOCATION "${HEARTH_XGRAMMAR_LIBRARY}")
target_include_directories(hearth_xgrammar SYSTEM INTERFACE "${HEARTH_XGRAMMAR_INCLUDE_DIR}")
target_link_libraries(hearth_xgrammar INTERFACE Threads::Threads)
