//===- Pipelines.cpp - the pass pipelines of cleave compile ---------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::cleave {

void addCleanupPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void addPrecisionPipeline(OpPassManager &pm, llvm::StringRef dtype, bool masterWeights) {
  if (dtype == "f32")
    return;
  ConvertPrecisionOptions options;
  options.dtype = dtype.str();
  options.masterWeights = masterWeights;
  pm.addNestedPass<func::FuncOp>(createConvertPrecision(options));
}

void addDecomposePipeline(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createDecompose());
}

void addPreparePipeline(OpPassManager &pm, const PrepareOptions &options) {
  // First: every later pass asks core ops' interfaces (a no-op after import,
  // which decomposes already; IR read from a file may hold composites).
  addDecomposePipeline(pm);
  addCleanupPipeline(pm);
  // Before fusion: a training dropout inside attention must stay visible.
  if (options.training) {
    TrainingModeOptions training;
    training.seed = options.seed;
    pm.addNestedPass<func::FuncOp>(createTrainingMode(training));
  }
  // Inference only: a training step updates what the fold bakes in.
  if (!options.training && options.foldBatchNorm && options.paramData && options.addParam)
    pm.addNestedPass<func::FuncOp>(createFoldBatchNorm(options.paramData, options.addParam));
  // After folding, which leaves the relu right after the convolution.
  if (!options.training && options.fuseConvEpilogue)
    pm.addNestedPass<func::FuncOp>(createFuseConvEpilogue());
  // After folding (CSE makes the scale and -inf constants shared scalars),
  // before anything measures memory or cost.
  if (options.fuseAttention)
    pm.addNestedPass<func::FuncOp>(createFuseAttention(options.paramData));
  // Last: fusion reads mask buffers' data at their imported (f32) type.
  addPrecisionPipeline(pm, options.dtype, options.training);
}

void addTrainingPipeline(OpPassManager &pm, const TrainingOptions &options) {
  // The batch split over ranks or microbatches: dropouts draw one device's
  // masks for the samples each holds.
  if (options.dataParallel * options.microbatches > 1 || options.pipelineStages > 1 ||
      options.tensorParallel > 1)
    pm.addNestedPass<func::FuncOp>(createGlobalDropout());
  if (options.dataParallel > 1) {
    SyncBatchNormOptions sync;
    sync.ranks = options.dataParallel;
    pm.addNestedPass<func::FuncOp>(createSyncBatchNorm(sync));
  }
  AppendLossOptions loss;
  loss.loss = options.loss;
  pm.addNestedPass<func::FuncOp>(createAppendLoss(loss));
  pm.addNestedPass<func::FuncOp>(createDifferentiate());
  const bool pipelined =
      options.pipelineStages > 1 || options.tensorParallel > 1 || options.partitioned;
  if (pipelined)
    pm.addPass(createPipelineTraining());
  bool sharded = options.zero != "none";
  auto reduce = [&] {
    if (options.dataParallel <= 1)
      return;
    ReduceGradientsOptions reduce;
    reduce.ranks = options.dataParallel;
    reduce.bucketBytes = options.bucketBytes;
    reduce.shard = sharded;
    pm.addNestedPass<func::FuncOp>(createReduceGradients(reduce));
  };
  // ZeRO-2 and 3 reduce each microbatch's gradients and accumulate parts;
  // otherwise the step's accumulated gradients are reduced once.
  bool partsPerMicrobatch = options.zero == "gradients" || options.zero == "parameters";
  if (partsPerMicrobatch)
    reduce();
  if (options.microbatches > 1 && !pipelined) {
    AccumulateGradientsOptions accumulate;
    accumulate.microbatches = options.microbatches;
    pm.addNestedPass<func::FuncOp>(createAccumulateGradients(accumulate));
  }
  if (!partsPerMicrobatch)
    reduce();
  if (options.zero == "parameters" && options.dataParallel > 1) {
    ShardParametersOptions shardParameters;
    shardParameters.ranks = options.dataParallel;
    pm.addNestedPass<func::FuncOp>(createShardParameters(shardParameters));
  }
  auto spill = [&] {
    if (options.spillParameters.empty() && !options.spillAll &&
        options.spillActivationLayers.empty())
      return;
    SpillToHostOptions spillOptions;
    spillOptions.parameters = options.spillParameters;
    spillOptions.activationLayers = options.spillActivationLayers;
    spillOptions.all = options.spillAll;
    pm.addNestedPass<func::FuncOp>(createSpillToHost(spillOptions));
  };
  if (options.optimizer == "none")
    return spill();
  AddOptimizerOptions optimizer;
  optimizer.optimizer = options.optimizer;
  optimizer.lr = options.lr;
  optimizer.weightDecay = options.weightDecay;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.eps = options.eps;
  optimizer.momentum = options.momentum;
  optimizer.dampening = options.dampening;
  optimizer.nesterov = options.nesterov;
  optimizer.clipGradNorm = options.clipGradNorm;
  optimizer.lrSchedule = options.lrSchedule;
  optimizer.warmupSteps = options.warmupSteps;
  optimizer.decaySteps = options.decaySteps;
  optimizer.earlyUpdates = options.earlyUpdates;
  optimizer.gatherBytes = options.bucketBytes;
  pm.addNestedPass<func::FuncOp>(createAddOptimizer(optimizer));
  spill();
}

void addSingleDevicePlanPipeline(OpPassManager &pm, const PrepareOptions &options) {
  addPreparePipeline(pm, options);
  pm.addNestedPass<func::FuncOp>(createPlanMemory());
}

namespace {
struct PipelineOptions : PassPipelineOptions<PipelineOptions> {
  Option<bool> fuseAttention{*this, "fuse-attention",
                             llvm::cl::desc("form cleave.attention (-cleave-fuse-attention)"),
                             llvm::cl::init(true)};
  Option<std::string> dtype{*this, "dtype",
                            llvm::cl::desc("the float type programs compute in: f32 or bf16"),
                            llvm::cl::init("f32")};

  PrepareOptions prepare() const {
    PrepareOptions options;
    options.fuseAttention = fuseAttention;
    options.dtype = dtype;
    return options;
  }
};
} // namespace

struct TrainingPipelineOptions : PassPipelineOptions<TrainingPipelineOptions> {
  Option<std::string> loss{*this, "loss", llvm::cl::desc("model, cross_entropy or mse"),
                           llvm::cl::init("model")};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("adamw, sgd or none"),
                                llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("learning rate (default: the optimizer's)"),
                    llvm::cl::init(-1)};
  Option<std::string> dtype{*this, "dtype", llvm::cl::desc("f32 or bf16"), llvm::cl::init("f32")};
  Option<int64_t> seed{*this, "seed", llvm::cl::desc("dropout seed"), llvm::cl::init(0)};
};

void registerCleavePipelines() {
  PassPipelineRegistration<TrainingPipelineOptions>(
      "cleave-training-step",
      "prepare for training, append the loss, differentiate, add the optimizer, plan memory",
      [](OpPassManager &pm, const TrainingPipelineOptions &options) {
        PrepareOptions prepare;
        prepare.training = true;
        prepare.seed = options.seed;
        prepare.dtype = options.dtype;
        addPreparePipeline(pm, prepare);
        TrainingOptions training;
        training.loss = options.loss;
        training.optimizer = options.optimizer;
        training.lr = options.lr;
        addTrainingPipeline(pm, training);
        pm.addNestedPass<func::FuncOp>(createPlanMemory());
      });
  registerCleavePasses();
  PassPipelineRegistration<PipelineOptions>(
      "cleave-prepare",
      "fold, fuse attention, convert to dtype: what analysis and planning see",
      [](OpPassManager &pm, const PipelineOptions &options) {
        addPreparePipeline(pm, options.prepare());
      });
  PassPipelineRegistration<PipelineOptions>("cleave-single-device-plan",
                                            "fold, fuse attention, convert to dtype, then plan "
                                            "memory for one device",
                                            [](OpPassManager &pm, const PipelineOptions &options) {
                                              addSingleDevicePlanPipeline(pm, options.prepare());
                                            });
}

} // namespace mlir::cleave
