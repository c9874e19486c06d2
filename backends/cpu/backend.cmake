# hearth_add_backend_cpu(NAME QUANTS): the CPU backend proper (ops, thread pool) under that
# name, on the kernels of the hearth_quants library QUANTS.
function(hearth_add_backend_cpu name quants)
  add_library(${name} STATIC
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/cpu_backend.cpp
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/f16_convert.cpp
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/moe_ref.cpp
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ops_basic.cpp
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ops_attention.cpp
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ops_moe.cpp
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/attention_kernels.cpp
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/thread_pool.cpp)
  target_link_libraries(${name} PUBLIC hearth_backend ${quants} Threads::Threads)
endfunction()
