//===- PlanParallelism.cpp - the planner as a pass ------------------------===//
//
// `cleave-opt -cleave-plan-parallelism="cluster=SPEC global-batch=B ..."`:
// what `cleave plan --emit-ir` does, on IR, for lit tests and pipelines.
//
//===----------------------------------------------------------------------===//

#include "cost/Format.h"
#include "passes/Passes.h"
#include "passes/Planner.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_PLANPARALLELISM
#include "passes/Passes.h.inc"

namespace {

struct PlanParallelismPass : impl::PlanParallelismBase<PlanParallelismPass> {
  using PlanParallelismBase::PlanParallelismBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("forward");
    if (!func || cluster.empty() || globalBatch <= 0 || (mode != "train" && mode != "infer") ||
        (sequenceParallel != "auto" && sequenceParallel != "off")) {
      module.emitError() << "cleave-plan-parallelism needs a @forward function, cluster=SPEC, "
                            "global-batch=B > 0, mode=train|infer and sequence-parallel=auto|off";
      return signalPassFailure();
    }
    ::cleave::cost::ClusterSpec spec;
    ::cleave::runtime::Status status = ::cleave::cost::loadClusterSpec(cluster, spec);
    if (!status.ok()) {
      module.emitError() << status.message();
      return signalPassFailure();
    }
    if (std::string error = useDevices(spec, devices); !error.empty()) {
      module.emitError() << error;
      return signalPassFailure();
    }
    PlannerOptions options;
    auto &search = options.search;
    search.devices = spec.deviceCount();
    search.globalBatch = globalBatch;
    search.training = mode == "train";
    search.mixedPrecision = search.training;
    search.paramDType =
        search.training ? ::cleave::runtime::DType::BF16 : ::cleave::runtime::DType::F32;
    if (!search.training)
      search.objective = ::cleave::planner::Objective::Latency;
    options.computeDType = search.paramDType;
    options.sequenceParallel = sequenceParallel == "auto";
    search.memoryBudget = memoryBytes > 0 ? double(memoryBytes) : defaultMemoryBudget(spec.device);
    if (tp > 0)
      search.tp = int(tp);
    if (pp > 0)
      search.pp = int(pp);
    FailureOr<PlannerResult> plan = planModel(func, spec, options);
    if (failed(plan))
      return signalPassFailure();
    if (plan->search.best.empty()) {
      InFlightDiagnostic diag = module.emitError()
                                << "no plan fits in "
                                << ::cleave::cost::humanBytes(search.memoryBudget)
                                << " per device";
      if (const auto &least = plan->search.leastMemory)
        diag << "; the least memory any candidate needs is "
             << ::cleave::cost::humanBytes(least->memory.total()) << " (" << least->label()
             << ")";
      return signalPassFailure();
    }
    annotateStrategy(func, *plan, plan->search.best.front());
  }
};

} // namespace
} // namespace mlir::cleave
