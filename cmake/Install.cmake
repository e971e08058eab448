# `cmake --install BUILD --prefix P`: the binaries to P/bin, the Python API to
# P/share/sweep/python and, with the trainer, the
# package a program with models of its own builds against (examples/own-model):
#   P/include/sweep/{trainer.h,model_keys.h,leaf.h}  the public headers: a model of one's own
#   P/include/sweep/{record_writer.h,record_format.h}  a program writing records itself (sweep::results)
#   P/lib/libsweep_*.a                           sweep_trainer and the libraries it links
#   P/lib/cmake/sweep/sweepConfig.cmake, ...     find_package(sweep) -> sweep::trainer
# Included by the top-level CMakeLists.txt after every folder has defined its targets.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS sweep sweep-rank sweep-blas-probe sweep-confine sweep-box RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The Python API (sweep.init, sweep.invariant, sweep_record) where `sweep` finds it for
# the programs it runs: P/share/sweep/python (harness/cli/main.cpp, offer_python_api).
install(DIRECTORY python/sweep python/sweep_record DESTINATION ${CMAKE_INSTALL_DATADIR}/sweep/python
        PATTERN "__pycache__" EXCLUDE)
if(NOT SWEEP_BUILD_TRAINER)
  return()
endif()
# Where LibTorch is not on the loader's default path (a PyTorch's), the installed
# sweep-train keeps the directories it linked from.
set_target_properties(sweep-train PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS sweep-train RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Everything in sweep_trainer's link interface that this project defines; CMake exports
# them all (static libraries carry their private dependencies). The interface targets
# only pass on link options (sanitizers) there.
set(sweep_exported sweep_trainer sweep_numerics sweep_data sweep_checkpoint sweep_comm sweep_results sweep_report
                   sweep_analysis sweep_record sweep_config sweep_text sweep_compile_flags sweep_build_info)

# Each folder names its own source (and build) directories as include directories, which
# the build tree's targets and tests use. Those are the build tree's only: wrapped in
# $<BUILD_INTERFACE:> here, so the folders' CMakeLists.txt stay as they are. An installed
# consumer gets P/include, through sweep::trainer, and nothing else.
foreach(target IN LISTS sweep_exported)
  # sweep_trainer -> sweep::trainer
  string(REGEX REPLACE "^sweep_" "" export_name ${target})
  set_property(TARGET ${target} PROPERTY EXPORT_NAME ${export_name})
  get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT dirs)
    continue()
  endif()
  set(wrapped "")
  foreach(dir IN LISTS dirs)
    if(dir MATCHES "^\\$<")
      list(APPEND wrapped "${dir}")  # already a generator expression
    else()
      list(APPEND wrapped "$<BUILD_INTERFACE:${dir}>")
    endif()
  endforeach()
  set_property(TARGET ${target} PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${wrapped}")
endforeach()
target_include_directories(sweep_trainer INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

target_include_directories(sweep_results INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# The public headers are include/sweep's, and only those: none includes a header of the
# tree's folders (scripts/build-own-model checks the installed set and compiles each alone).
file(GLOB sweep_public_headers ${PROJECT_SOURCE_DIR}/include/sweep/*.h)
install(FILES ${sweep_public_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sweep)
install(TARGETS ${sweep_exported} EXPORT sweepTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

set(sweep_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/sweep)
install(EXPORT sweepTargets NAMESPACE sweep:: DESTINATION ${sweep_cmake_dir})
# The config finds the same dependencies again, LibTorch first where this build found it.
set(SWEEP_TORCH_DIR "${Torch_DIR}")
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/sweepConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/sweepConfig.cmake INSTALL_DESTINATION ${sweep_cmake_dir})
# 0.x: a minor version may change the library's interface.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sweepConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sweepConfig.cmake ${PROJECT_BINARY_DIR}/sweepConfigVersion.cmake
        DESTINATION ${sweep_cmake_dir})
