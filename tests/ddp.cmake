# examples/pytorch-ddp/train.py (an ordinary PyTorch DDP script on sweep.init()) driven by
# `sweep run` over a trimmed sweeps/pytorch-ddp.yaml: tests/python/test_pytorch_ddp.py.
# Needs Debian's python3-torch, h5py, xxhash and yaml (skipped, exit 77, without them).

# a. Two ranks under the local launcher (mpiexec, gloo): one record per run by rank 0,
# bit-identical in a second sweep directory; no Slurm (SLURM_CONF emptied).
add_test(NAME pytorch_ddp
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/python/test_pytorch_ddp.py ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(pytorch_ddp PROPERTIES LABELS mpi TIMEOUT 600 PROCESSORS 2 SKIP_RETURN_CODE 77
                     ENVIRONMENT "PYTHONPATH=${CMAKE_SOURCE_DIR}/python;SLURM_CONF=")

# b. Two ranks under the Slurm launcher on the test cluster (tests/slurm/start-cluster.sh),
# one on each test node of the partition `nodes`; found through SLURM_CONF as the other
# slurm tests find it (tests/CMakeLists.txt sets SWEEP_TEST_SLURM_CONF with them). Exit 77
# (skipped) when no cluster answers.
if(DEFINED SWEEP_TEST_SLURM_CONF)
  add_test(NAME pytorch_ddp_slurm
           COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/python/test_pytorch_ddp.py ${CMAKE_BINARY_DIR}/bin
                   --slurm)
  set_tests_properties(pytorch_ddp_slurm PROPERTIES LABELS slurm TIMEOUT 600 PROCESSORS 2 RUN_SERIAL ON
                       SKIP_RETURN_CODE 77
                       ENVIRONMENT "PYTHONPATH=${CMAKE_SOURCE_DIR}/python;SLURM_CONF=${SWEEP_TEST_SLURM_CONF}")
endif()

# sweep.ddp.RankGradNorms on two gloo processes spawned on this host: DDP's gradient bit for
# bit with and without the hook, each rank's share its own gradient over the world size.
add_test(NAME rank_grad_norms COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/python/test_rank_grad_norms.py)
set_tests_properties(rank_grad_norms PROPERTIES LABELS e2e TIMEOUT 300 PROCESSORS 2)
