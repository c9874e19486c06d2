# hearth_quants: quantized block formats, scalar references, and dot-product / GEMM kernels
# with runtime SIMD dispatch. Only the vec_dot_<isa>.cpp files get ISA flags, so one binary
# runs on every x86-64 CPU (and the library builds on non-x86 with the scalar path only).
include(CheckCXXCompilerFlag)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/vec_dot_avx2.cpp PROPERTIES
    COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/vec_dot_avx512.cpp PROPERTIES
    COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni")
  # The AMX level (AVX-512 + AMX-INT8 tiles), where the compiler knows the instructions;
  # without it the AMX level is never detected.
  check_cxx_compiler_flag("-mamx-tile -mamx-int8" HEARTH_HAVE_AMX_FLAGS)
  if(HEARTH_HAVE_AMX_FLAGS)
    set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/vec_dot_amx.cpp PROPERTIES
      COMPILE_OPTIONS
      "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mamx-tile;-mamx-int8")
  endif()
endif()

# hearth_add_quants(NAME): the library under that name (a sanitizer tree builds it twice:
# backends/cpu/CMakeLists.txt).
function(hearth_add_quants name)
  add_library(${name} STATIC
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/quant_ref.cpp
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/repack.cpp
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/vec_dot.cpp
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/vec_dot_scalar.cpp)
  target_include_directories(${name} PUBLIC ${HEARTH_LAYER_backends})
  target_link_libraries(${name} PUBLIC hearth_common)
  # No a*b+c fusion behind our back: results must not depend on which TU (ISA flags) computed
  # them, and gemm must reproduce vec_dot bit for bit.
  target_compile_options(${name} PRIVATE -ffp-contract=off)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    target_sources(${name} PRIVATE
      ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/vec_dot_avx2.cpp
      ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/vec_dot_avx512.cpp)
    target_compile_definitions(${name} PRIVATE HEARTH_X86_KERNELS)
    if(HEARTH_HAVE_AMX_FLAGS)
      target_sources(${name} PRIVATE ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/vec_dot_amx.cpp)
      target_compile_definitions(${name} PRIVATE HEARTH_AMX_KERNELS)
    endif()
  endif()
endfunction()
