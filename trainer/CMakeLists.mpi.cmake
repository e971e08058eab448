# sweep_comm: communicators and the canonical cross-rank reduction. LibTorch-free, so the
# MPI tests and the reduction benchmark build without it. Included from
# trainer/CMakeLists.txt after sweep_numerics is defined.
find_package(MPI REQUIRED COMPONENTS CXX)

add_library(sweep_comm ${CMAKE_CURRENT_LIST_DIR}/mpi_communicator.cpp ${CMAKE_CURRENT_LIST_DIR}/comm_selftest.cpp
                       ${CMAKE_CURRENT_LIST_DIR}/watchdog.cpp
                       ${CMAKE_CURRENT_LIST_DIR}/canonical_allreduce.cpp)
target_include_directories(sweep_comm PUBLIC ${CMAKE_CURRENT_LIST_DIR})
# -O3 so the tree's elementwise adds vectorize; -ffp-contract=off comes from sweep_warnings.
target_compile_options(sweep_comm PRIVATE -O3)
target_link_libraries(sweep_comm PUBLIC MPI::MPI_CXX sweep_numerics PRIVATE sweep_warnings)
# Only the C API is used: skip the deprecated C++ bindings' headers (faster, no warnings).
target_compile_definitions(sweep_comm PUBLIC OMPI_SKIP_MPICXX MPICH_SKIP_MPICXX)
