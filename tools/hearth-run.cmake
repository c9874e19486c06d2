add_executable(hearth-run
  ${CMAKE_CURRENT_LIST_DIR}/hearth-run/main.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hearth-run/bench.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hearth-run/speculate.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hearth-run/decode_ops.cpp)
target_include_directories(hearth-run PRIVATE ${CMAKE_CURRENT_LIST_DIR}/hearth-run)
target_link_libraries(hearth-run PRIVATE hearth_engine hearth_backend_cpu hearth_devices hearth_machine_probe CLI11::CLI11 nlohmann_json::nlohmann_json)
target_compile_definitions(hearth-run PRIVATE HEARTH_VERSION="${PROJECT_VERSION}")
install(TARGETS hearth-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
