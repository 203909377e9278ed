//===- Passes.td - cleave passes ---------------------------*- tablegen -*-===//

#ifndef CLEAVE_PASSES_TD
#define CLEAVE_PASSES_TD

include "mlir/Pass/PassBase.td"

def Decompose : Pass<"cleave-decompose", "mlir::func::FuncOp"> {
  let summary = "Rewrite composite ops (var, logsumexp, hardswish, ...) into core ops";
  let description = [{
    The first pass after import. Every op with `DecomposableOpInterface`
    (CleaveCompositeOps.td) is replaced by the core ops its rule builds, until
    none is left; only core ops carry kernels, costs, sharding and gradient
    rules, so every later pass, differentiation included, sees core ops only.
    docs/ops.md lists the core set and the table of decompositions.
  }];
  let statistics = [
    Statistic<"numDecomposed", "decomposed", "Composite ops rewritten">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def PrintModelSummary : Pass<"cleave-print-summary", "mlir::ModuleOp"> {
  let summary = "Print ops, parameters and bytes per module of the model";
  let description = [{
    Prints one row per module scope, cut to `depth` components of the module
    path (`blocks.3.attn` at depth 1 is `blocks`, at depth 2 `blocks.3`): the
    number of compute ops, of parameter elements, of buffer elements, and the
    bytes of both. Ops are attributed by their `NameLoc` scope, parameters to
    the module their name is under (`blocks.0.fc.weight` to `blocks.0.fc`).
    Ops and parameters outside any module are `(root)`. Changes nothing.
  }];
  let options = [
    Option<"depth", "depth", "unsigned", /*default=*/"1",
           "module path components that name a row">,
  ];
}

def FoldBatchNorm : Pass<"cleave-fold-batch-norm", "mlir::func::FuncOp"> {
  let summary = "Fold inference batch norms into the convolutions before them";
  let description = [{
    Replaces `batch_norm(conv2d(x, W, c), mean, var, gamma, beta)` by one
    `conv2d(x, W * s, (c - mean) * s + beta)` with s = gamma / sqrt(var +
    eps) per output channel, when the convolution's result has no other
    user and every one of those tensors is f32 with data at compile time: a
    `cleave.constant`, or a `cleave.param` whose data the caller supplies
    (`createFoldBatchNorm(lookup, sink)`, which `cleave compile`, `plan` and
    `cost` use for inference). The folded weight and bias become params
    named `<filter>.bn_folded` and `<conv bias>.bn_folded` (the filter's
    name with `.bias` when the convolution has none), whose data goes to the
    sink; in `cleave-opt`, which has no sink, they become constants. Params
    and constants left without users are erased. Training programs must not
    run it: it bakes in statistics and weights that a step updates.
    `-debug-only=cleave-fold-batch-norm` says why a batch norm stayed.
  }];
  let statistics = [
    Statistic<"numFolded", "folded-batch-norms", "batch norms folded into a convolution">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def FuseConvEpilogue : Pass<"cleave-fuse-conv-epilogue", "mlir::func::FuncOp"> {
  let summary = "Fuse a convolution's residual add and relu into one cleave.fused_conv2d";
  let description = [{
    Replaces `conv2d`, an optional `add` of a tensor of the result's type
    (a residual), and an optional `relu`, or `maximum` with a splat 0 and
    an optional `minimum` with a splat constant after it (relu6, hardtanh(0,
    c) as imported), by one `cleave.fused_conv2d` computing the same, when
    each intermediate result has no other user. The fused op sits where the
    chain's last op was. f32 only. Inference programs only: the fused op
    has no gradient. `cleave compile`, `plan` and `cost` run it for
    inference unless `--no-fuse-conv-epilogue`.
  }];
  let statistics = [
    Statistic<"numFused", "fused-convolutions", "convolutions that took their epilogue">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def FuseAttention : Pass<"cleave-fuse-attention", "mlir::func::FuncOp"> {
  let summary = "Replace attention written as matmul, scale, mask, softmax, matmul by cleave.attention";
  let description = [{
    Finds `matmul(q, k^T)`, an optional scale (mul or div by a scalar
    constant, on the scores, on q or on k), an optional mask
    (`where(cond, -inf, scores)` or `where(cond, scores, -inf)`; a finite
    fill at most -1e9, such as `torch.finfo(dtype).min`, counts as -inf when
    no query has every key hidden), a softmax
    over the last dim, optional dropouts (identities in plans) and
    `matmul(probabilities, v)`, with q, k, v of shape [B, H, S, D], and
    replaces the chain by one `cleave.attention` when every intermediate
    has no other user and the mask provably hides exactly the keys
    j > i + Sk - Sq of query i (`causal = true`) or nothing
    (`causal = false`). The mask's condition is evaluated element by
    element from constants (a folded `tril`, `tril` of a splat) and from
    buffers whose data the caller supplies (`createFuseAttention(lookup)`,
    which `cleave compile`, `plan` and `cost` use); in `cleave-opt` buffers
    have no data, so a mask held in a buffer is not proved and stays. k^T
    is a permute of the last two dims, whose input becomes k (any other
    rhs gets a permute). Ops left without users (the mask's computation)
    are erased. Anything else is left alone. `-debug-only=cleave-fuse-attention`
    says why a softmax was not fused.
  }];
  let statistics = [
    Statistic<"fused", "fused-attentions", "chains replaced by cleave.attention">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def PlanMemory : Pass<"cleave-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Assign every activation an offset in one arena, by liveness";
  let description = [{
    Static memory planning for one program. Each value that needs memory of
    its own (function arguments and results of ops that compute) lives from
    the op that defines it to its last use, or to the end when it is returned
    or an argument (inputs stay intact, so a program can run again on them);
    a view (`ExecutableOpInterface::getViewedOperand`, e.g. `reshape`) shares
    its operand's buffer and extends its lifetime. Parameters and constants
    live in the weights, not the arena. Buffers are placed largest first at
    the lowest 64-byte-aligned offset that overlaps no buffer live at the same
    time. Kernel scratch (`getScratchBytes`) is a buffer live during its op.

    Annotates `cleave.arena_offset` on arguments and ops,
    `cleave.scratch_offset` on ops with scratch, and on the function
    `cleave.arena_bytes` (the arena size) and `cleave.peak_live_bytes` (the
    most bytes live at one time: no placement can use less).
  }];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def ConvertPrecision : Pass<"cleave-convert-precision", "mlir::func::FuncOp"> {
  let summary = "Compute in bf16: every f32 tensor inside the function becomes bf16";
  let description = [{
    Rewrites the function to compute in a narrower float type (`dtype`,
    bf16 by default; f16 too): params and constants (their values rounded to
    nearest, ties to even), every op's f32 result and every `cleave.cast` to
    f32 take the narrow type. Integer and i1 tensors are untouched. The
    function's signature stays: each f32 argument is cast to the narrow type
    before its first user, and each f32 result is cast back to f32 before the
    return, so callers keep feeding and reading f32 (an argument returned as
    it is stays exact). Weights keep their f32 data beside the IR; the plan
    emitter rounds params whose type is bf16 when it writes them.

    Kernels accumulate in f32 (GEMMs, reductions, normalizations) and round
    each op's result once, so the IR says what is stored, not how it is
    summed. Ops infer and verify their types as usual; the rewritten function
    verifies because every float value changes together. `cleave compile
    --dtype bf16` runs this right after import, folding and attention
    fusion.
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"bf16\"",
           "the float type to compute in: bf16 or f16">,
    Option<"masterWeights", "master-weights", "bool", /*default=*/"false",
           "keep parameters, buffers and training state f32 (the master copy a "
           "training step updates) and cast each to the narrow type before its "
           "first reader">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def PlanParallelism : Pass<"cleave-plan-parallelism", "mlir::ModuleOp"> {
  let summary = "Choose tensor, pipeline and data parallelism; annotate the IR";
  let description = [{
    Runs the planner (docs/planner.md) on @forward for a cluster spec and
    writes the chosen strategy as attributes: `cleave.mesh`,
    `cleave.schedule` and `cleave.data_parallel` on the module; on each
    computing op its `cleave.stage`, `cleave.sharding` (one layout per
    result) and `cleave.recompute`; on params their `cleave.sharding` and on
    weights the `cleave.stages` that read them. Fails, naming the least
    memory any candidate needs, when nothing fits the budget. This is what
    `cleave plan --emit-ir` writes.
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", /*default=*/"\"\"",
           "cluster spec file (required)">,
    Option<"devices", "devices", "int", /*default=*/"0",
           "devices to plan for (default: the spec's)">,
    Option<"globalBatch", "global-batch", "int64_t", /*default=*/"0",
           "samples per step (required)">,
    Option<"mode", "mode", "std::string", /*default=*/"\"train\"",
           "train or infer">,
    Option<"tp", "tp", "int", /*default=*/"0", "pin the tensor-parallel degree (0: search)">,
    Option<"pp", "pp", "int", /*default=*/"0", "pin the pipeline degree (0: search)">,
    Option<"sequenceParallel", "sequence-parallel", "std::string", /*default=*/"\"auto\"",
           "auto: tp splits may reduce-scatter partial sums; off: all-reduce only">,
    Option<"memoryBytes", "mem-per-device", "int64_t", /*default=*/"0",
           "memory budget per device in bytes (0: the spec's capacity minus its reserve)">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def InsertCollectives : Pass<"cleave-insert-collectives", "mlir::func::FuncOp"> {
  let summary = "Make the planner's layout changes explicit collectives";
  let description = [{
    The first lowering step of a planned strategy. Reads the layouts the
    planner wrote (`cleave.sharding` on results and params,
    `cleave.operand_sharding` on ops; function arguments, constants and
    unannotated values are replicated, and the function returns replicated
    values) and, wherever an operand arrives in another layout than its op
    needs, inserts the op that changes it across the tp group:
    `cleave.all_reduce` (partial -> replicated), `cleave.reduce_scatter`
    (partial -> split), `cleave.all_gather` (split -> replicated),
    `cleave.shard` (replicated -> split, a local slice) or
    `cleave.all_to_all` (one split for another). One change of a value to a
    layout serves all its readers. Shapes stay global.
  }];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def OutlineStages : Pass<"cleave-outline-stages", "mlir::ModuleOp"> {
  let summary = "Split @forward into one function per pipeline stage, with send/recv";
  let description = [{
    Reads the planner's `cleave.stage` (and, for an interleaved schedule,
    `cleave.chunk`) on every computing op of @forward and moves each stage's
    ops (each chunk's, when interleaved) into a function of its own,
    `@forward_stage0`, `@forward_stage1`, ... (`@forward_chunk<c>` when
    interleaved), in pipeline order. A value one function computes and a
    later one reads crosses with a `cleave.send` / `cleave.recv` pair of
    the same tag; the weights a function reads are cloned into it; the
    model's inputs become arguments of the functions that read them and its
    outputs results of the functions that compute them (keeping their
    `cleave.name`). Every function records its `cleave.stage`; @forward is
    removed. Data must flow forward: a stage reading a later one is an error.
  }];
  let dependentDialects = ["mlir::cleave::CleaveDialect", "mlir::func::FuncDialect"];
}

def PipelineTraining : Pass<"cleave-pipeline-training", "mlir::ModuleOp"> {
  let summary = "Split a differentiated step into one unrolled step per pipeline stage";
  let description = [{
    Runs after `-cleave-differentiate` on a @forward whose ops the planner
    placed (`cleave.stage`, and `cleave.chunk` when interleaved; backward
    ops inherit their forward op's; the unplaced loss belongs to the last
    chunk) and whose `cleave.schedule` names the schedule (gpipe, 1f1b,
    interleaved), the microbatches and the virtual stages. Each stage gets
    `@train_stage<s>`: its slots in schedule order, each slot the forward
    or backward of one chunk on one microbatch, marked as a phase
    (`cleave.phase`, `cleave.phase_chunk`, `cleave.phase_microbatch`).
    Activations cross stages forward and gradients backward as
    `cleave.send` / `cleave.recv` pairs, one tag per (value, receiving
    chunk); each microbatch has its own arguments for the model's inputs.
    Ops marked `cleave.recompute` are computed again in their backward slot
    instead of being kept from forward. Gradients are summed over the
    microbatches as each backward finishes and scaled by 1/microbatches
    after the last; a weight tied across stages (a `cleave.tied_gradient`
    sum) has each stage's partial sent to the others and summed in chunk
    order on every stage that holds it, so their copies stay equal. The
    last stage returns the loss, the mean over the microbatches; every
    stage returns `grad.<param>` for the weights it holds, for
    `-cleave-reduce-gradients` and `-cleave-add-optimizer`. @forward is
    removed.
  }];
  let dependentDialects = ["mlir::cleave::CleaveDialect", "mlir::func::FuncDialect"];
}

def LocalShapes : Pass<"cleave-local-shapes", "mlir::ModuleOp"> {
  let summary = "Give every value the shape one rank of its tp group holds";
  let description = [{
    After collectives are explicit (cleave-insert-collectives), every value
    is laid out as its `cleave.sharding` says (params too; function
    arguments and unannotated values are replicated). This pass gives each
    value the shape one rank holds: a dim laid out `split(d)` or
    `split(d, blocks=b)` over the module's `cleave.mesh` tp degree holds
    1/tp of dim d; partial and replicated values keep their shape. A slice
    along a split dim takes the same blocks of the rank's part. Every op is
    then verified at these shapes, so a layout that does not compose is an
    error at the op. Marks the module `cleave.local_shapes`.
  }];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def SpecializeRanks : Pass<"cleave-specialize-ranks", "mlir::ModuleOp"> {
  let summary = "Write each function out once per tp index, the rank's part explicit";
  let description = [{
    Runs after cleave-local-shapes. Every function `@f` becomes
    `@f_tp0` ... `@f_tp<n-1>` (with `cleave.tp`): in copy t, a `cleave.shard`
    becomes the slices of part t of each of its blocks, and each op's
    ShardingOpInterface::specializeForRank adjusts what depends on the part
    (an embedding of a split vocabulary gets its `row_offset`; a row-parallel
    linear or conv2d adds its bias on tp index 0 only). These functions are
    the plan's programs, one per (stage, tp index).
  }];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def MarkRecompute : Pass<"cleave-mark-recompute", "mlir::func::FuncOp"> {
  let summary = "Mark the regions a backward pass recomputes instead of keeping";
  let description = [{
    The planner marks every op of a layer it recomputes `cleave.recompute`.
    A recomputation region is a maximal run of consecutive marked ops of one
    layer (params and constants neither end nor join a run; collectives the
    lowering inserted for a marked op are marked too, so the region redoes
    its communication). Each op of region k gets `cleave.recompute_region = k`;
    the function gets `cleave.recompute_regions`, one summary per region:
    its `layer`, `ops`, its `checkpoints` (values it reads from outside the
    region, weights excepted: these stay live through backward) and their
    `checkpoint_bytes`, and `recomputed_bytes`, what the region computes and
    nothing outside reads (the activations backward regenerates instead of
    keeping). Views count no bytes. Idempotent.
  }];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def TestOpCost : Pass<"cleave-test-op-cost", "mlir::func::FuncOp"> {
  let summary = "Test only: print what each op reports through CostOpInterface";
  let description = [{
    Prints one line per op with a kernel: its name, op class, forward and
    backward FLOPs, bytes read and written, kernel launches, the GEMM shape
    when it has one, and the activation bytes it keeps for backward. Exposes
    the cost interface to lit; changes nothing.
  }];
}

def TestShardingRules : Pass<"cleave-test-sharding-rules", "mlir::func::FuncOp"> {
  let summary = "Test only: print each op's rule from ShardingOpInterface";
  let description = [{
    Prints one line per op: its name and its sharding rule in the readable
    form of `ShardingRule::str()` (operand and result dims as factors, then
    each factor's size and kind). Exposes the sharding interface to lit;
    changes nothing.
  }];
}

def TestLayerGroups : Pass<"cleave-test-layer-groups", "mlir::func::FuncOp"> {
  let summary = "Test only: print the layers and which of them are structurally identical";
  let description = [{
    Prints one line per layer (passes/Layers.h): its name, ops, parameter
    elements, and its kind: the first layer with the same structural
    signature. Repeated blocks of a transformer share one kind; a residual
    block with a downsampling branch has a kind of its own. Changes nothing.
  }];
}

//===----------------------------------------------------------------------===//
// Training (docs/training.md).
//===----------------------------------------------------------------------===//

def TrainingMode : Pass<"cleave-training-mode", "mlir::func::FuncOp"> {
  let summary = "Give dropout and batch_norm their training semantics (model.train())";
  let description = [{
    Rewrites the forward pass to what PyTorch computes in `model.train()`,
    whatever mode the model was traced in: a `cleave.dropout` with `p > 0`
    becomes `cleave.dropout_train` (its mask from cleave's counter-based
    generator keyed by `seed`, the step counter and a stream number per
    dropout), one with `p = 0` the identity; a `cleave.batch_norm` becomes
    `cleave.batch_norm_train` (batch statistics) followed by
    `cleave.update_running_stats` on its running statistics, which must be
    model buffers. Creates the step counter, `cleave.state "step"`, when a
    dropout needs it.
  }];
  let options = [
    Option<"seed", "seed", "int64_t", /*default=*/"0",
           "the seed of the dropout masks (>= 0)">,
  ];
  let statistics = [
    Statistic<"dropouts", "dropouts", "dropouts given random masks">,
    Statistic<"batchNorms", "batch-norms", "batch norms given batch statistics">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def AppendLoss : Pass<"cleave-append-loss", "mlir::func::FuncOp"> {
  let summary = "Make the function return the training loss";
  let description = [{
    `loss=model`: the function must return one float scalar, the model's own
    loss. `loss=cross_entropy`: it must return logits `[..., C]`; an argument
    `labels` (i64, the logits' shape without the last dim) is appended and
    the function returns `F.cross_entropy(logits.reshape(-1, C),
    labels.reshape(-1))` (mean, ignore_index -100). `loss=mse`: `labels`
    has the output's type and the loss is the mean squared error. The
    result is named `loss`; its ops carry the scope `loss`.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"model\"",
           "model, cross_entropy or mse">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def Differentiate : Pass<"cleave-differentiate", "mlir::func::FuncOp"> {
  let summary = "Append the backward pass: gradients of the loss for every trainable parameter";
  let description = [{
    Reverse-mode differentiation of a straight-line function that returns one
    float scalar (the loss). Walking the ops backwards from the loss, it asks
    each op that a gradient reaches for its operands' gradients
    (`GradientOpInterface::buildGradients`) and sums the contributions of
    values read several times; only float values that depend on a trainable
    parameter (a `cleave.param` that is neither a buffer nor frozen) carry
    gradients. Each trainable parameter the loss depends on gets a result
    after the loss, named `grad.<parameter>` with `cleave.gradient_of`; one
    it does not depend on gets none (as PyTorch leaves its `.grad` None).
    The backward ops keep the location of the op they differentiate; the
    first carries `cleave.phase = "backward"`. An op without a gradient rule
    is an error at its location.
  }];
  let statistics = [
    Statistic<"backwardOps", "backward-ops", "ops added by differentiation">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def GlobalDropout : Pass<"cleave-global-dropout", "mlir::func::FuncOp"> {
  let summary = "Each dropout draws one device's mask for the samples it holds";
  let description = [{
    Runs before `-cleave-differentiate` when the step's batch is split over
    data-parallel ranks or microbatches (or the step is partitioned). Every
    `cleave.dropout_train` gets the step's `sample_offset` state (an i64
    scalar the trainer sets to the first sample each microbatch holds before
    running its phases) and `samples`, the microbatch size (dim 0 of the
    function's inputs): the kernel then draws, for each element, the mask
    element of the same sample, position and step in the whole batch's
    tensor, so every mesh applies the masks one device applies. A dropout's
    input must hold its samples' rows in dim 0 (dim 0 a multiple of the
    microbatch size), as a batch-first model's activations do; one that does
    not is an error at the op.
  }];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def SyncBatchNorm : Pass<"cleave-sync-batch-norm", "mlir::func::FuncOp"> {
  let summary = "Batch statistics over every data-parallel rank's share of the batch";
  let description = [{
    Runs before `-cleave-differentiate` when `ranks` data-parallel ranks each
    hold a share of the batch. Each `cleave.batch_norm_train` becomes the
    statistics of the whole batch, as `torch.nn.SyncBatchNorm`: the
    per-channel sum of the rank's values is summed over `group`
    (`cleave.all_reduce`), the mean divides it by the global count, the
    centered squares are summed the same way (two passes, as numerically
    sound as the fused kernel's), and the normalization, weight and bias
    follow as elementwise ops. Differentiation then builds the backward from
    these ops' rules; the all_reduce's rule (its gradient is the all_reduce
    of its result's gradient) sums the statistics' gradients over the ranks,
    which is the synchronized backward. The running statistics' update
    counts the global number of values (its unbiased correction). f32 only;
    with `ranks` 1 nothing changes.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1", "data-parallel ranks">,
    Option<"group", "group", "std::string", /*default=*/"\"dp\"", "the group reduced over">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def AccumulateGradients : Pass<"cleave-accumulate-gradients", "mlir::func::FuncOp"> {
  let summary = "Accumulate the gradients over the microbatches of a step";
  let description = [{
    Runs after `-cleave-differentiate` when a step runs its forward and
    backward phases once per microbatch (`microbatches` of them) and its
    optimizer once. Each `grad.<parameter>` result gets a zeroed
    `cleave.state "gradient_accumulator.<parameter>"`: backward adds the
    microbatch's gradient to it (`sum = acc + g`, `cleave.assign acc, sum`)
    as soon as the gradient is final. The optimizer phase, which starts
    after the last backward op, returns `sum * (1 / microbatches)` (the
    mean over the microbatches: the whole batch's gradient for a loss that
    is a mean over equal microbatches) and sets the accumulator back to
    zero for the next step. Data-parallel reduction
    (`-cleave-reduce-gradients`) then runs once per step on the
    accumulated gradients. With `microbatches` 1 nothing changes.
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "microbatches per step">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def ReduceGradients : Pass<"cleave-reduce-gradients", "mlir::func::FuncOp"> {
  let summary = "Average the gradients and the loss over the data-parallel ranks, in fused buckets";
  let description = [{
    Runs between `-cleave-differentiate` and `-cleave-add-optimizer` when
    `ranks` data-parallel ranks each compute the step on their share of the
    batch. The `grad.<parameter>` results are taken in the order backward
    makes them final and packed into buckets of at most `bucket-bytes` (one
    dtype each; a larger gradient is a bucket alone), Horovod's tensor
    fusion: each bucket is flattened into one buffer, summed over `group`
    with one `cleave.all_reduce` placed right after its last gradient (so
    the reduction of early buckets can overlap the rest of backward), scaled
    by 1/ranks and cut back into the gradients, which replace the results.
    The loss (result 0, an f32 scalar) is averaged the same way right after
    it is computed, so every rank reports the loss of the whole batch (of
    each microbatch, when gradients accumulate over microbatches). Averaging is what PyTorch's
    DistributedDataParallel does; it equals one device on the whole batch
    for a loss that is a mean over equal shares. Every gradient is reduced
    dense, including an embedding's. With `ranks` 1 nothing changes.

    With `shard` (ZeRO), each rank keeps only its part of every gradient:
    a gradient of n elements is flattened, zero-padded to ranks * k
    elements (k = ceil(n / ranks)) and viewed as [ranks, k]; a bucket
    concatenates these views along dim 1 and one `cleave.reduce_scatter`
    over dim 0 leaves each rank row r of the sum: elements [r*k, (r+1)*k)
    of each of its gradients. The results become these flat parts, of type
    tensor<k>, marked `cleave.shard = {group, ranks}`; `-cleave-add-optimizer`
    updates the same part of the parameter and gathers it whole again.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1", "data-parallel ranks">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"25 << 20",
           "the most bytes of gradients one all_reduce carries">,
    Option<"group", "group", "std::string", /*default=*/"\"dp\"", "the group reduced over">,
    Option<"shard", "shard", "bool", /*default=*/"false",
           "reduce-scatter: each rank keeps its part of every gradient (ZeRO)">,
  ];
  let statistics = [
    Statistic<"buckets", "buckets",
              "all_reduce (reduce_scatter with shard) ops the gradients were packed into">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def ShardParameters : Pass<"cleave-shard-parameters", "mlir::func::FuncOp"> {
  let summary = "ZeRO-3: each rank holds its part of every trained parameter, gathered before use";
  let description = [{
    Runs after `-cleave-reduce-gradients{shard=true}` (and gradient
    accumulation), before `-cleave-add-optimizer`. Every trainable
    `cleave.param` whose gradient result is sharded over `ranks` ranks
    becomes the rank's flat part of it: a `cleave.param` of the same name
    and type tensor<k> (k = ceil(numel / ranks)) marked `cleave.shard =
    {group, ranks, shape}`, which the runtime fills from the whole tensor
    by its index in the group. Each phase that reads the parameter
    all-gathers the parts right before its first reader (forward, and
    again in backward), drops the padding and reshapes: the whole
    parameter lives only while a phase uses it, and nothing keeps it from
    forward to backward. The optimizer then updates the part in place.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1", "data-parallel ranks">,
  ];
  let statistics = [
    Statistic<"sharded", "sharded", "parameters held as parts">,
    Statistic<"gathers", "gathers", "all_gather ops that rebuild a parameter">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def SpillToHost : Pass<"cleave-spill-to-host", "mlir::func::FuncOp"> {
  let summary = "Keep parameters, their gradients' copies and optimizer state in host memory";
  let description = [{
    Model spilling (Hydra) with the optimizer on the host (ZeRO-Offload), on
    a training step after `-cleave-add-optimizer`. Each spilled parameter
    (named in `parameters`, marked `cleave.spill`, or every parameter with
    `all`) gets `cleave.pool = "host"`:
    - every run of ops of one layer and phase that reads it reads a
      `cleave.prefetch` of it instead, placed at the start of the layer run
      before (one layer ahead, so the copy overlaps that layer's compute);
    - its gradient is copied out by `cleave.spill` into
      `cleave.state "host_gradient.<parameter>"` right after backward makes
      it final, and every later reader (clipping, the update) reads that
      host copy;
    - its update (`cleave.adamw`, `cleave.sgd`) then runs on host tensors,
      and its optimizer states move to the host too.
    So the device holds a spilled parameter only from its prefetch to its
    layer's last reader, and its gradient only until the copy. A gradient
    accumulated over microbatches (a persistent accumulator) is refused.

    The saved activations of the layers in `activation-layers` (forward
    values of at least 4 KiB that the layer's backward reads and that are
    not returned) are spilled after forward computes them, into
    `cleave.state "host_activation.<layer>.<n>"`, and prefetched back a
    run ahead of each backward run that reads them.
  }];
  let options = [
    ListOption<"parameters", "parameters", "std::string", "parameters to spill">,
    ListOption<"activationLayers", "activation-layers", "std::string",
               "layers whose saved activations spill">,
    Option<"all", "all", "bool", /*default=*/"false", "spill every parameter">,
  ];
  let statistics = [
    Statistic<"parametersSpilled", "parameters", "parameters kept in host memory">,
    Statistic<"prefetches", "prefetches", "cleave.prefetch ops inserted">,
    Statistic<"gradientsSpilled", "gradients", "gradients copied to the host">,
    Statistic<"activationsSpilled", "activations", "saved activations copied to the host">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

def AddOptimizer : Pass<"cleave-add-optimizer", "mlir::func::FuncOp"> {
  let summary = "Append the optimizer phase: clipping, the step counter and one update per parameter";
  let description = [{
    Consumes the `grad.<parameter>` results of `-cleave-differentiate`:
    optionally scales the gradients by `min(1, clip-grad-norm / (norm +
    1e-6))` with their global L2 norm (`torch.nn.utils.clip_grad_norm_`),
    increments `cleave.state "step"`, and updates each parameter in place
    with `cleave.adamw` or `cleave.sgd`, their moments and momentum buffers
    in `cleave.state "optimizer.<kind>.<parameter>"`. The function then
    returns the loss alone; the first optimizer op carries `cleave.phase =
    "optimizer"`. Defaults are torch's: AdamW lr 1e-3, betas (0.9, 0.999),
    eps 1e-8, weight decay 1e-2; SGD needs `lr` and has momentum 0,
    dampening 0, weight decay 0. With `early-updates` (and no clipping,
    which needs every gradient first) each update is placed right after its
    gradient is final and the parameter's last backward reader, inside the
    backward phase; the step counter's write-back stays last.

    A gradient marked `cleave.shard` (ZeRO, `-cleave-reduce-gradients
    {shard=true}`) updates the rank's part of the parameter: cut from it
    into `zero.param_shard.<parameter>` (the optimizer writes persistent
    tensors in place), its moments part-sized. At the end of the step the
    updated parts are gathered back into the parameters, packed like the
    gradients (at most `gather-bytes` per `cleave.all_gather`, in update
    order). A parameter that is itself a part (ZeRO-3,
    `-cleave-shard-parameters`) is updated in place and not gathered.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"", "adamw or sgd">,
    Option<"lr", "lr", "double", /*default=*/"-1", "learning rate (default: the optimizer's)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW's beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW's beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW's eps">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1",
           "weight decay (default: AdamW 1e-2, SGD 0)">,
    Option<"momentum", "momentum", "double", /*default=*/"0", "SGD's momentum">,
    Option<"dampening", "dampening", "double", /*default=*/"0", "SGD's dampening">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD's Nesterov momentum">,
    Option<"clipGradNorm", "clip-grad-norm", "double", /*default=*/"0",
           "clip the gradients' global L2 norm to this (0: no clipping)">,
    Option<"lrSchedule", "lr-schedule", "std::string", /*default=*/"\"constant\"",
           "constant, linear or cosine">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "steps of linear warmup">,
    Option<"decaySteps", "decay-steps", "int64_t", /*default=*/"0",
           "the step where linear or cosine decay reaches zero">,
    Option<"earlyUpdates", "early-updates", "bool", /*default=*/"false",
           "update each parameter as soon as its gradient is final, inside the backward "
           "phase, so that gradients are never all live at once (one microbatch, no "
           "clipping: the updates are independent of each other)">,
    Option<"gatherBytes", "gather-bytes", "int64_t", /*default=*/"25 << 20",
           "ZeRO-1/2: the most bytes of updated parameters one all_gather brings back">,
  ];
  let dependentDialects = ["mlir::cleave::CleaveDialect"];
}

#endif // CLEAVE_PASSES_TD
