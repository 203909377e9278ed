//===- PipelineTraining.h - the slots of a pipelined training step -*- C++ -*-===//
//
// The order in which each pipeline stage runs the forward and backward of
// its chunks on each microbatch: what -cleave-pipeline-training unrolls
// into each stage's step and what the plan's schedule lists.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_PIPELINETRAINING_H
#define CLEAVE_PASSES_PIPELINETRAINING_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::cleave {

struct TrainingSlot {
  bool backward = false;
  int64_t chunk = 0, microbatch = 0;
};

/// Per stage, its slots in order (chunk c runs on stage c % stages):
///  - gpipe: every forward, then every backward, microbatches in order;
///  - 1f1b: stage s runs min(stages - s - 1, M) forwards, then alternates
///    one forward and one backward, then the remaining backwards, so it
///    holds at most stages - s microbatches' activations;
///  - interleaved (virtualStages > 1, M a multiple of stages): Megatron-LM's
///    interleaved 1F1B over the stage's chunks, microbatches in groups of
///    `stages` per chunk.
/// Returns an empty list (and sets `error`) for a schedule it cannot build.
std::vector<std::vector<TrainingSlot>> trainingSlots(const std::string &kind, int64_t stages,
                                                     int64_t microbatches, int64_t virtualStages,
                                                     std::string *error);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_PIPELINETRAINING_H
