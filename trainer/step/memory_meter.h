// How many bytes of LibTorch CPU tensors are alive, and the most that were alive since a
// point in time: the trainer marks the start of each step and reads the step's peak, so
// the record holds what each rank needed *during* the step (activations, gradients,
// temporaries, gathered ZeRO-3 parameters), not only what it holds between steps.
#pragma once

#include <cstdint>

#include "sweep/record_format.h"  // RankMemory

namespace sweep {

class Communicator;  // communicator.h
struct FlatParams;   // flat_params.h
struct ZeroShards;   // zero_shards.h

/// The process's one meter. The first call installs it as LibTorch's CPU allocator (it
/// forwards to the allocator it replaces and counts bytes); it is never removed, so a
/// tensor may outlive any user of it. Tensors allocated before that call are not counted.
class TensorMemoryMeter {
 public:
  static TensorMemoryMeter& instance();
  /// Bytes of CPU tensor storage alive now (allocated through the meter).
  int64_t live() const;
  /// Starts a window: its peak is the live bytes now.
  void start_window();
  /// The most bytes alive at any moment since start_window().
  int64_t window_peak() const;
  /// False when LibTorch's CPU allocator offered no raw allocation to count through;
  /// then every figure is 0.
  bool installed() const { return installed_; }

 private:
  explicit TensorMemoryMeter(bool installed) : installed_(installed) {}
  const bool installed_;
};

/// The process's peak resident set size in bytes (VmHWM in /proc/self/status), or -1
/// where the kernel does not say.
int64_t peak_resident_bytes();

/// Every rank's memory (collective: an allgather): what it holds between steps, from its
/// flat buffers and ZeRO shards, and what it needed during the steps: its tensors'
/// high-water mark `step_peak_tensor_bytes` (-1: not measured, e.g. on a GPU) plus its own
/// flat buffers, and its peak resident set.
RankMemory gather_rank_memory(Communicator& comm, const FlatParams& flat, const ZeroShards& zero,
                              int64_t step_peak_tensor_bytes);

}  // namespace sweep
