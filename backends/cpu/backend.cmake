add_library(hearth_backend_cpu STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cpu_backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/f16_convert.cpp
  ${CMAKE_CURRENT_LIST_DIR}/moe_ref.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ops_basic.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ops_attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ops_moe.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention_kernels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/thread_pool.cpp)
target_link_libraries(hearth_backend_cpu PUBLIC hearth_backend hearth_quants Threads::Threads)
