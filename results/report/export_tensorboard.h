// `sweep export --format tensorboard`: a sweep as TensorBoard event files, written from
// the published Event, Summary and HParams protobuf definitions by hand (the wire format
// is small; no protobuf library is linked).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "report.h"  // SweepRecords

namespace sweep {

/// The file a TensorBoard export directory holds to say it is one: `sweep export` only
/// writes into a new or empty directory or one holding this file.
inline constexpr const char* kTensorboardMarker = "SWEEP-TENSORBOARD-EXPORT";

/// Each file of the export, as (path relative to the export directory, bytes):
/// - the marker;
/// - `events.out.tfevents.0.sweep`: the HParams experiment (every config key that varies
///   across the sweep's readable runs: numbers as FLOAT64 with their interval, other
///   values as STRING with their set; metrics train/loss and eval/loss);
/// - `<run_id>/events.out.tfevents.0.sweep` per readable run: the file version event,
///   the session start (the run's value of each varying key; the session group is the
///   run's values without train.seed, so TensorBoard groups seeds), one event per step
///   with the scalars train/loss, train/lr, train/grad_norm, train/clip_coef,
///   train/loss_scale, train/step_time_s and train/tokens_per_s, and the gradient telemetry
///   the step has (telemetry/rank_grad_norm/rank_K every step of /ranks/grad_norm; at a
///   /telemetry row telemetry/tensor_grad_norm/TENSOR, and per MoE layer
///   telemetry/expert_load/layer_L and telemetry/routing_entropy/layer_L, with
///   telemetry/routed_tokens/layer_L a histogram of the expert indices weighted by their
///   tokens, a bucket per expert), one per held-out evaluation with eval/loss, and the
///   session end (success, or failure for a diverged run). Scalars are TensorBoard's float32 (`sweep export --format
///   csv` keeps the doubles). Wall times end at the record file's modification time and step back by the recorded step
///   and evaluation times.
/// Records are TFRecord frames (length, masked CRC-32C of the length, data, masked
/// CRC-32C of the data). The same records give the same bytes.
std::vector<std::pair<std::string, std::string>> render_tensorboard(const SweepRecords& sweep);

/// CRC-32C (Castagnoli) of `data`, and TFRecord's masked form of it.
uint32_t crc32c(const std::string& data);
uint32_t masked_crc32c(const std::string& data);

}  // namespace sweep
