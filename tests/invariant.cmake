# python/sweep/invariant.py: the canonical reduction for PyTorch scripts (issue 37).

# The tree is one function in C++ and Python: both check tests/data/canonical_tree_vectors.json.
sweep_test(canonical_vectors_test unit unit/canonical_vectors_test.cpp)
target_link_libraries(canonical_vectors_test PRIVATE sweep_numerics)

# The module and examples/pytorch-invariant/train.py under mpiexec (gloo on the CPU): every
# layout of a global batch one run, resume across layouts, plain DDP's teeth, bad input.
# Needs Debian's python3-torch and python3-numpy (skipped, exit 77, without them).
add_test(NAME python_invariant COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/python/test_invariant.py
                                          ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(python_invariant PROPERTIES LABELS mpi TIMEOUT 900 PROCESSORS 2 SKIP_RETURN_CODE 77
                     ENVIRONMENT PYTHONPATH=${CMAKE_SOURCE_DIR}/python)
