// Wrapping one rank's command in a container runtime. The rank's launcher (mpiexec,
// srun) stays on the host and starts one container per rank: the "hybrid" model that
// Apptainer documents for MPI (containers/README.md).
#pragma once

#include <string>
#include <vector>

#include "launch_config.h"  // ContainerSpec

namespace sweep {

/// Placeholder that sweep-rank replaces with `-e NAME` for each launcher variable of the
/// rank (OMPI_*, PMIX_*, SLURM_*, ...): docker and podman do not pass the host
/// environment into a container, and those names are only known once the rank runs.
inline constexpr const char* kRankEnvPlaceholder = "@SWEEP_RANK_ENV@";

/// `command` run inside `c`'s image: e.g. apptainer exec --bind D:D IMAGE command..., or
/// for charliecloud [env USER=NAME] ch-run -b D:D --cd D IMAGE -- command... (USER only
/// when this process has none: ch-run refuses to start without it). `sweep_dir`
/// (absolute) is bound at the same path so the run sees its config and writes its record
/// where the driver looks. Returns `command` unchanged when no runtime is set.
std::vector<std::string> wrap_in_container(const ContainerSpec& c, const std::string& sweep_dir,
                                           const std::vector<std::string>& command);

/// True for runtimes that need kRankEnvPlaceholder expanded (docker, podman).
bool container_needs_rank_env(const ContainerSpec& c);

}  // namespace sweep
