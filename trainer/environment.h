// What the run ran on: library versions, BLAS, threads, host, relevant variables.
// It changes the bits, so every record carries it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "run_config.h"

namespace sweep {

/// Seeds every RNG, turns on deterministic algorithms and pins intra-op, inter-op and
/// BLAS threads to cfg.train.threads. Call once, before building the model.
void set_up_determinism(const RunConfig& cfg);

/// Key/value pairs for the record's /environment group.
std::vector<std::pair<std::string, std::string>> collect_environment(const RunConfig& cfg);

/// Which BLAS LibTorch calls, e.g. "OpenBLAS 0.3.21 ... (libopenblasp-r0.3.21.so)".
std::string blas_description();

}  // namespace sweep
