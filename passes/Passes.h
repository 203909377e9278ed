//===- Passes.h - cleave passes ---------------------------------*- C++ -*-===//

#ifndef CLEAVE_PASSES_PASSES_H
#define CLEAVE_PASSES_PASSES_H

#include "dialects/cleave/CleaveDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/Pass.h"

#include <functional>
#include <string>
#include <vector>

namespace mlir::cleave {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The data of a buffer (row-major, its IR type's element type) by the
/// param's name, or null when it is unknown (meta models, parsed IR).
using ParamDataLookup = std::function<const void *(llvm::StringRef name)>;

/// Takes a param a pass derived at compile time (a filter with a batch norm
/// folded in): its name, shape and f32 data, which the plan then holds as
/// the model's own params.
using ParamDataSink = std::function<void(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                                         std::vector<float> data)>;

/// -cleave-fuse-attention, reading mask buffers through `paramData`.
std::unique_ptr<Pass> createFuseAttention(ParamDataLookup paramData);

/// -cleave-fold-batch-norm, reading params through `paramData` and handing
/// the folded ones to `addParam`.
std::unique_ptr<Pass> createFoldBatchNorm(ParamDataLookup paramData, ParamDataSink addParam);

/// How an imported model is prepared for analysis, planning and emission.
struct PrepareOptions {
  /// Form cleave.attention (`--no-fuse-attention` turns it off, to compare).
  bool fuseAttention = true;
  /// The model's buffer data, so masks held in buffers can be proved causal.
  ParamDataLookup paramData;
  /// Inference: fold batch norms into the convolutions before them
  /// (`--no-fold-batch-norm` turns it off, to compare), with the params'
  /// data from `paramData` and the folded ones handed to `addParam`. Needs
  /// both; never in training.
  bool foldBatchNorm = true;
  ParamDataSink addParam;
  /// Inference: fuse each convolution's residual add and relu into it
  /// (-cleave-fuse-conv-epilogue; `--no-fuse-conv-epilogue` turns it off).
  bool fuseConvEpilogue = true;
  /// The float type programs compute in (`cleave compile --dtype`): f32
  /// keeps the imported types; bf16 runs -cleave-convert-precision.
  std::string dtype = "f32";
  /// Prepare a training step: PyTorch's model.train() semantics
  /// (-cleave-training-mode, before attention fusion, which would otherwise
  /// take a dropout for an identity) and, with a narrow dtype, f32 master
  /// weights.
  bool training = false;
  /// The dropout masks' seed, for training.
  int64_t seed = 0;
};

/// The loss and optimizer of a training step (docs/training.md); the
/// options of -cleave-append-loss and -cleave-add-optimizer. Negative lr
/// and weightDecay mean the optimizer's defaults.
struct TrainingOptions {
  std::string loss = "model";      ///< model, cross_entropy or mse
  std::string optimizer = "adamw"; ///< adamw, sgd or none (return the gradients)
  double lr = -1, weightDecay = -1;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double momentum = 0, dampening = 0;
  bool nesterov = false;
  double clipGradNorm = 0; ///< 0: no clipping
  std::string lrSchedule = "constant";
  int64_t warmupSteps = 0, decaySteps = 0;
  /// Update each parameter as soon as its gradient is final (one
  /// microbatch, no clipping): gradients are never all live at once.
  bool earlyUpdates = true;
  /// Microbatches a step accumulates gradients over
  /// (-cleave-accumulate-gradients); 1: none.
  int64_t microbatches = 1;
  /// Data-parallel ranks the gradients are averaged over
  /// (-cleave-reduce-gradients); 1: none.
  int64_t dataParallel = 1;
  /// The most bytes one gradient all_reduce carries.
  int64_t bucketBytes = 25 << 20;
  /// ZeRO over the data-parallel ranks: "none"; "optimizer" (each rank
  /// keeps and updates its part of the optimizer state, the step's
  /// gradients reduce-scattered once); "gradients" (also each microbatch's
  /// gradients reduce-scattered as backward makes them, accumulated as
  /// parts). With one microbatch the two are the same program.
  /// "parameters" (ZeRO-3): also each rank holds only its part of every
  /// trained parameter, gathered whole before each phase reads it.
  std::string zero = "none";
  /// Pipeline stages: with more than one, the differentiated step is split
  /// into one unrolled step per stage (-cleave-pipeline-training, which
  /// also accumulates the microbatches' gradients) before the reduction
  /// and the optimizer, which then run on every stage's step.
  int64_t pipelineStages = 1;
  /// Tensor-parallel ranks: with more than one the step is differentiated
  /// as each rank's program (after -cleave-local-shapes) and split into the
  /// stages' steps as a pipeline's is, even for one stage.
  int64_t tensorParallel = 1;
  /// Split into the stages' steps even for one stage and no tp group:
  /// recomputation runs in the backward slots that step has.
  bool partitioned = false;
  /// Parameters kept in host memory with their gradients' copies and
  /// optimizer state (-cleave-spill-to-host, after the optimizer); the
  /// planner's choice. `spillAll`: every parameter.
  std::vector<std::string> spillParameters;
  bool spillAll = false;
  /// Layers whose saved activations are kept in host memory.
  std::vector<std::string> spillActivationLayers;
};

/// Canonicalize and CSE: fold what the importer left.
void addCleanupPipeline(OpPassManager &pm);
/// What every command runs on an imported model before it analyzes, plans
/// or emits it: the clean-up, attention fusion (which reads mask buffers at
/// their imported type), then the precision conversion for `dtype`. The
/// cost model, the planner and the memory planner all see this IR.
void addPreparePipeline(OpPassManager &pm, const PrepareOptions &options = {});
/// `cleave-decompose` on every function: composite ops become core ops.
void addDecomposePipeline(OpPassManager &pm);
/// What `cleave compile` runs between import and emission for one device:
/// the preparation, then memory planning.
void addSingleDevicePlanPipeline(OpPassManager &pm, const PrepareOptions &options = {});

/// Adds `cleave-convert-precision` to `dtype` on every function; nothing for
/// f32 (the imported precision). `masterWeights` keeps parameters and
/// training state f32 (training).
void addPrecisionPipeline(OpPassManager &pm, llvm::StringRef dtype, bool masterWeights = false);

/// What turns a prepared forward (addPreparePipeline with `training`) into a
/// training step: the loss, the backward pass and, unless the optimizer is
/// "none", the optimizer phase. Memory planning follows separately.
void addTrainingPipeline(OpPassManager &pm, const TrainingOptions &options);

/// Registers the passes and the named pipelines `cleave-prepare` and
/// `cleave-single-device-plan` (options `fuse-attention`, default true, and
/// `dtype`, f32 or bf16, default f32) and `cleave-training-step` (the
/// preparation for training, the training pipeline and memory planning;
/// options `loss`, `optimizer`, `lr`, `dtype`, `seed`).
void registerCleavePipelines();

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_PASSES_H
