// What identifies a run's container image in its record (container.runtime, .image,
// .digest), the checks a charliecloud image gets before any run starts, and the line
// `sweep reproduce` prints when a re-run's container is not the record's.
#pragma once

#include <string>
#include <vector>

#include "launch_config.h"  // ContainerSpec

namespace sweep {

/// "xxh3:" and 16 hex digits: XXH3-64 over the entries of `dir` sorted by relative path
/// (bytewise), each as its path, type and permission bits, a link's target and a regular
/// file's contents. Owners and times do not count: a copy of an image is the same image.
/// A file this process cannot read counts by its size (`unreadable:SIZE`). Uncached.
/// Throws std::runtime_error naming the directory when it cannot be walked.
std::string directory_image_digest(const std::string& dir);

/// The digest of `c`'s image as this machine sees it: a directory by
/// directory_image_digest, a file (.sif, .sqfs) by the XXH3-64 of its bytes (both
/// "xxh3:..."); "" without a runtime, for a named image (docker, podman) or one that is
/// not here. Cached under `cache_dir` ("" = no cache) by what changes when the contents
/// may have (each entry's inode, size, mtime and ctime): a directory of 10,000 entries is
/// then one walk of stat() calls instead of reading every byte.
std::string container_image_digest(const ContainerSpec& c, const std::string& cache_dir);

/// SWEEP_CONTAINER_RUNTIME=..., SWEEP_CONTAINER_IMAGE=... (absolute when the image is
/// here) and SWEEP_CONTAINER_DIGEST=... for every run's command (LocalLaunch::env), from
/// which record writers fill container.*; {} without a runtime.
std::vector<std::string> container_run_env(const ContainerSpec& c, const std::string& digest);

/// Throws ConfigError (naming `source`, the grid file) when a charliecloud directory
/// image here cannot run the sweep in `sweep_dir`: ch-run cannot create a bind's
/// destination in a read-only image, so each one (the sweep dir, every bind) must be a
/// directory of the image unless it is under /tmp (ch-run binds the host's /tmp); an
/// absolute trainer must be in the image. Checks nothing for other runtimes or an image
/// that is not on this machine (it may be on the compute nodes only).
void check_charliecloud_image(const ContainerSpec& c, const std::string& sweep_dir, const std::string& source);

/// The container a record ran in, as its environment says.
struct RecordedContainer {
  std::string runtime;  ///< container.runtime; "" = on the host (or a record older than the key)
  std::string image;    ///< container.image
  std::string digest;   ///< container.digest
};

/// "" when a re-run in `now` (runtime "" = on the host) with image digest `now_digest`
/// runs where the record did; otherwise the warning `sweep reproduce` prints: the record
/// ran in a container and the re-run does not (or the other way round), or the images'
/// digests differ. Libraries from another image may give other bits.
std::string container_difference(const RecordedContainer& was, const ContainerSpec& now, const std::string& now_digest);

}  // namespace sweep
