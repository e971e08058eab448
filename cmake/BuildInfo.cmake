# Generates build_info.h with the git commit and dirty flag at configure *and* build time.
set(SWEEP_BUILD_INFO_DIR ${CMAKE_BINARY_DIR}/generated)
add_custom_target(sweep_build_info_gen
  COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR} -DOUT=${SWEEP_BUILD_INFO_DIR}/build_info.h
          -DVERSION=${PROJECT_VERSION} -P ${CMAKE_SOURCE_DIR}/cmake/build_info_write.cmake
  BYPRODUCTS ${SWEEP_BUILD_INFO_DIR}/build_info.h)
add_library(sweep_build_info INTERFACE)
target_include_directories(sweep_build_info INTERFACE ${SWEEP_BUILD_INFO_DIR})
add_dependencies(sweep_build_info sweep_build_info_gen)
