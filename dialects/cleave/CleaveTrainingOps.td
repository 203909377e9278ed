//===- CleaveTrainingOps.td - ops of a training step -------*- tablegen -*-===//
//
// What a training step computes beyond a forward pass (docs/training.md):
// persistent training state and in-place updates, the training forms of
// dropout and batch_norm, the loss, backward ops for the ops whose gradient is
// clearly better as one kernel, and the optimizer updates. Included by
// CleaveOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRAINING_OPS_TD
#define CLEAVE_TRAINING_OPS_TD

// The step counter: an i64 scalar. The gradient scale of clipping: f32.
def Cleave_StepTensor : 0DTensorOf<[I64]>;
def Cleave_ScaleTensor : 0DTensorOf<[F32]>;

// A backward op computes gradients from the gradient of a forward op's
// result; its results' types are explicit in the IR.
class Cleave_BackwardOp<string mnemonic, list<Trait> traits = [],
                        list<string> executableOverrides = [],
                        list<string> costOverrides = [],
                        list<string> shardingOverrides = []>
    : Cleave_Op<mnemonic, !listconcat([Pure], traits), executableOverrides,
                costOverrides, shardingOverrides> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

// An update writes persistent tensors in place and has no results; its
// written operands are `getUpdatedOperands`.
class Cleave_UpdateOp<string mnemonic, list<Trait> traits = []>
    : Cleave_Op<mnemonic, !listconcat([MemoryEffects<[MemWrite]>], traits),
                ["getUpdatedOperands"], ["getCost", "getSavedForBackward"]> {
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Persistent state.
//===----------------------------------------------------------------------===//

def Cleave_StateOp : Cleave_Op<"state", [Pure], [], ["getCost"]> {
  let summary = "persistent training state, zero when training starts";
  let description = [{
    A tensor that lives across training steps but is not part of the model:
    an optimizer's moments (`optimizer.exp_avg.<param>`), a momentum buffer,
    the step counter (`step`, an i64 scalar counting the optimizer steps
    taken). Plans keep states in their state region, zeroed when a plan is
    loaded and restored from checkpoints.

    Example:

    ```mlir
    %m = cleave.state "optimizer.exp_avg.fc.weight" : tensor<512x128xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_AssignOp : Cleave_UpdateOp<"assign", [AllTypesMatch<["target", "value"]>]> {
  let summary = "write a value into a persistent tensor";
  let description = [{
    Overwrites `target` (a `cleave.param` or `cleave.state`) with `value` of
    the same type; it is the last reader of the target's old value. The
    traced `num_batches_tracked += 1` of a batch norm in training mode and the
    step counter's increment are assigns.

    Example:

    ```mlir
    cleave.assign %step, %next : tensor<i64>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$target, Cleave_Tensor:$value);
  let assemblyFormat = "$target `,` $value attr-dict `:` type($target)";
}

//===----------------------------------------------------------------------===//
// Spilling: tensors held in host memory (-cleave-spill-to-host).
//===----------------------------------------------------------------------===//

def Cleave_PrefetchOp : Cleave_Op<"prefetch",
    [MemoryEffects<[MemRead]>, AllTypesMatch<["source", "result"]>], [],
    ["getCost", "getSavedForBackward"]> {
  let summary = "copy a tensor held in host memory to the device";
  let description = [{
    Copies `source`, a `cleave.param` or `cleave.state` that the plan keeps in
    host memory (`cleave.pool = "host"`), into a device buffer: the result,
    which the ops of one layer and phase read instead. The runtime runs it on
    a copy thread (CPU) or stream (CUDA), so placed a layer ahead of its
    readers it overlaps with the compute in between. It reads memory, so two
    prefetches of one tensor (forward and backward) stay two copies.

    Example:

    ```mlir
    %w = cleave.param "blocks.3.fc.weight" {cleave.pool = "host"} : tensor<512x128xf32>
    %d = cleave.prefetch %w : tensor<512x128xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$source);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$source attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_SpillOp : Cleave_UpdateOp<"spill", [AllTypesMatch<["target", "value"]>]> {
  let summary = "copy a device tensor into a persistent tensor held in host memory";
  let description = [{
    Overwrites `target`, a `cleave.param` or `cleave.state` kept in host memory
    (`cleave.pool = "host"`), with `value`, a device buffer, on the copy
    thread or stream: a spilled layer's gradient leaves the device as soon as
    backward computes it, and its optimizer step runs on the host copy.

    Example:

    ```mlir
    cleave.spill %host_grad, %g : tensor<512x128xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$target, Cleave_Tensor:$value);
  let assemblyFormat = "$target `,` $value attr-dict `:` type($target)";
}

//===----------------------------------------------------------------------===//
// Training forms of forward ops.
//===----------------------------------------------------------------------===//

def Cleave_DropoutTrainOp : Cleave_Op<"dropout_train",
    [Pure, AllTypesMatch<["input", "result"]>], [], ["getCost", "getSavedForBackward"], [],
    Cleave_HasGradient> {
  let summary = "dropout with cleave's counter-based generator";
  let description = [{
    Zeroes each element with probability `p` and scales the others by
    `1 / (1 - p)`. Whether element `i` is kept is a pure function of
    (`seed`, the step counter, `stream`, `i`) (Philox-4x32-10,
    docs/plan-format.md), so backward applies the same mask by running the
    same op on the gradient, and no mask is stored. `stream` tells the
    dropouts of one model apart. The masks differ from PyTorch's.

    With `sample_offset` (an i64 scalar: the first of the step's samples
    this input holds) and `samples` (how many it holds; dim 0 is their rows,
    dim 0 / samples rows each), `i` is the element's index in the tensor of
    the step's whole batch: a rank or microbatch holding samples [o, o + n)
    draws the elements one device draws for them (-cleave-global-dropout).

    Example:

    ```mlir
    %y = cleave.dropout_train %x, %step {p = 1.000000e-01 : f64, seed = 0 : i64, stream = 3 : i64}
        : tensor<2x8xf32>, tensor<i64>
    %z = cleave.dropout_train %x, %step, %offset {p = 1.000000e-01 : f64, samples = 2 : i64, seed = 0 : i64, stream = 3 : i64}
        : tensor<2x8xf32>, tensor<i64>, tensor<i64>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_StepTensor:$step,
                       Optional<Cleave_StepTensor>:$sample_offset, F64Attr:$p,
                       I64Attr:$seed, I64Attr:$stream, OptionalAttr<I64Attr>:$samples);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $step (`,` $sample_offset^)? attr-dict `:` type($input) `,` type($step)
    (`,` type($sample_offset)^)?
  }];
  let hasVerifier = 1;
}

def Cleave_BatchNormTrainOp : Cleave_Op<"batch_norm_train",
    [Pure, AttrSizedOperandSegments, AllTypesMatch<["input", "result"]>,
     Cleave_BatchStatistics], [],
    ["getFlopsPerElement", "getSavedForBackward"], [], Cleave_HasGradient> {
  let summary = "batch normalization with batch statistics (training)";
  let description = [{
    Normalizes channel dim 1 of `input [N, C, ...]` with the mean and the
    biased variance of each channel over N and the trailing dims, then applies
    the optional `weight` and `bias`, as `torch.nn.BatchNorm2d` in training.
    Also yields the statistics (`[C]` each): backward and the running
    statistics' update read them.

    Example:

    ```mlir
    %y, %mean, %var = cleave.batch_norm_train %x weight %w bias %b {eps = 1.0e-05 : f64}
        : (tensor<4x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<4x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Optional<Cleave_FloatTensor>:$weight,
                       Optional<Cleave_FloatTensor>:$bias, F64Attr:$eps);
  let results = (outs Cleave_FloatTensor:$result, Cleave_FloatTensor:$mean,
                      Cleave_FloatTensor:$var);
  let assemblyFormat = [{
    $input (`weight` $weight^)? (`bias` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_UpdateRunningStatsOp : Cleave_UpdateOp<"update_running_stats"> {
  let summary = "blend batch statistics into a batch norm's running statistics";
  let description = [{
    `running_mean = momentum * mean + (1 - momentum) * running_mean` and
    `running_var = momentum * var * count / (count - 1) + (1 - momentum) *
    running_var`: `var` is the biased variance over `count` values per
    channel, the running estimate the unbiased one, as PyTorch's batch norm
    in training. Updates the two running statistics in place.

    Example:

    ```mlir
    cleave.update_running_stats %rm, %rv, %mean, %var {momentum = 1.0e-01 : f64, count = 256 : i64}
        : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$running_mean, Cleave_FloatTensor:$running_var,
                       Cleave_FloatTensor:$mean, Cleave_FloatTensor:$var,
                       F64Attr:$momentum, I64Attr:$count);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

//===----------------------------------------------------------------------===//
// Losses.
//===----------------------------------------------------------------------===//

def Cleave_NllLossOp : Cleave_Op<"nll_loss", [Pure], [], ["getCost", "getSavedForBackward"], [],
    Cleave_HasGradient> {
  let summary = "negative log-likelihood of class indices";
  let description = [{
    `loss_i = -input[i, target[i]]` for `input [N, C]` (log-probabilities) and
    integer `target [N]`, zero where `target[i] == ignore_index`;
    `reduction` is `mean` (over the rows not ignored), `sum` or `none`
    (the `[N]` losses), as `torch.nn.functional.nll_loss`. A target outside
    `[0, C)` that is not ignored is a runtime error.

    Example:

    ```mlir
    %l = cleave.nll_loss %logp, %labels {reduction = "mean", ignore_index = -100 : i64}
        : (tensor<16x10xf32>, tensor<16xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_IndexTensor:$target,
                       DefaultValuedAttr<StrAttr, "\"mean\"">:$reduction,
                       DefaultValuedAttr<SI64Attr, "-100">:$ignore_index);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_NllLossBackwardOp : Cleave_BackwardOp<"nll_loss_backward"> {
  let summary = "gradient of nll_loss with respect to its input";
  let description = [{
    Scatters the loss's gradient (`[]`, or `[N]` for `none`) to
    `-grad[i]` at `[i, target[i]]` (divided by the count of rows not ignored
    for `mean`), zero elsewhere and on ignored rows.

    ```mlir
    %g = cleave.nll_loss_backward %dl, %labels {reduction = "mean", ignore_index = -100 : i64}
        : (tensor<f32>, tensor<16xi64>) -> tensor<16x10xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_IndexTensor:$target,
                       DefaultValuedAttr<StrAttr, "\"mean\"">:$reduction,
                       DefaultValuedAttr<SI64Attr, "-100">:$ignore_index);
  let results = (outs Cleave_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Backward ops.
//===----------------------------------------------------------------------===//

class Cleave_NormalizeBackwardOp<string mnemonic, string formula>
    : Cleave_BackwardOp<mnemonic, [AllTypesMatch<["grad", "output", "result"]>]> {
  let summary = "gradient of " # !subst("_backward", "", mnemonic);
  let description = "Computes `" # formula # "` along `dim`, from the "
      # "gradient of the result and the forward's result.\n\n```mlir\n%dx = cleave."
      # mnemonic # " %g, %y {dim = 1 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> "
      # "tensor<2x8xf32>\n```";
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$output, I64Attr:$dim);
  let results = (outs Cleave_FloatTensor:$result);
}

def Cleave_SoftmaxBackwardOp
    : Cleave_NormalizeBackwardOp<"softmax_backward", "y * (g - sum(g * y))">;
def Cleave_LogSoftmaxBackwardOp
    : Cleave_NormalizeBackwardOp<"log_softmax_backward", "g - exp(y) * sum(g)">;

def Cleave_LayerNormBackwardOp : Cleave_BackwardOp<"layer_norm_backward"> {
  let summary = "gradient of layer_norm";
  let description = [{
    The gradients of `layer_norm` with respect to its input, weight and bias,
    the statistics recomputed from `input`. Without `weight` the weight is
    one; the weight and bias gradients are computed either way.

    ```mlir
    %dx, %dw, %db = cleave.layer_norm_backward %g, %x, %w {normalized_shape = array<i64: 128>, eps = 1.0e-05 : f64}
        : (tensor<2x8x128xf32>, tensor<2x8x128xf32>, tensor<128xf32>) -> (tensor<2x8x128xf32>, tensor<128xf32>, tensor<128xf32>)
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$input,
                       Optional<Cleave_FloatTensor>:$weight,
                       DenseI64ArrayAttr:$normalized_shape, F64Attr:$eps);
  let results = (outs Cleave_FloatTensor:$grad_input, Cleave_FloatTensor:$grad_weight,
                      Cleave_FloatTensor:$grad_bias);
}

def Cleave_BatchNormBackwardOp : Cleave_BackwardOp<"batch_norm_backward"> {
  let summary = "gradient of batch_norm_train";
  let description = [{
    The gradients of a batch norm in training mode with respect to its input,
    weight and bias, from the batch statistics `batch_norm_train` yielded.

    ```mlir
    %dx, %dw, %db = cleave.batch_norm_backward %g, %x, %mean, %var, %w {eps = 1.0e-05 : f64}
        : (tensor<4x64x8x8xf32>, tensor<4x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
        -> (tensor<4x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$input,
                       Cleave_FloatTensor:$mean, Cleave_FloatTensor:$var,
                       Optional<Cleave_FloatTensor>:$weight, F64Attr:$eps);
  let results = (outs Cleave_FloatTensor:$grad_input, Cleave_FloatTensor:$grad_weight,
                      Cleave_FloatTensor:$grad_bias);
}

def Cleave_AttentionBackwardOp
    : Cleave_BackwardOp<"attention_backward", [], ["getScratchBytes"], ["getCost"]> {
  let summary = "gradient of the fused attention";
  let description = [{
    The gradients of `attention` with respect to q, k and v, from the
    gradient of its result and the result itself. The scores are recomputed
    in tiles: the kernel never stores `Sq x Sk` values; its scratch holds two
    floats per query row.

    ```mlir
    %dq, %dk, %dv = cleave.attention_backward %g, %q, %k, %v, %y {causal = true, scale = 0.125 : f64}
        : (tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>)
        -> (tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>)
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$q, Cleave_FloatTensor:$k,
                       Cleave_FloatTensor:$v, Cleave_FloatTensor:$output, BoolAttr:$causal,
                       F64Attr:$scale);
  let results = (outs Cleave_FloatTensor:$grad_q, Cleave_FloatTensor:$grad_k,
                      Cleave_FloatTensor:$grad_v);
}

def Cleave_EmbeddingBackwardOp : Cleave_BackwardOp<"embedding_backward", [], [], [],
                                                  ["specializeForRank"]> {
  let summary = "gradient of an embedding table (a scatter-add)";
  let description = [{
    Adds the gradient of each looked-up row into its row of a zero table of
    the result's shape, in index order (deterministic); the `padding_idx` row
    stays zero. With `row_offset` the table is a shard, as in `embedding`;
    in a tensor-parallel step the table gradient of a split vocabulary is
    laid out `split(0)` and each tp rank's copy gets its rows' offset.

    ```mlir
    %dw = cleave.embedding_backward %g, %ids : (tensor<2x8x128xf32>, tensor<2x8xi64>) -> tensor<512x128xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_IndexTensor:$indices,
                       OptionalAttr<I64Attr>:$row_offset, OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Cleave_FloatTensor:$result);
}

class Cleave_Conv2dBackwardOp<string mnemonic, string operand, string what>
    : Cleave_BackwardOp<mnemonic, [], ["getScratchBytes"], ["getCost"]> {
  let summary = "gradient of conv2d with respect to its " # what;
  let description = "The gradient of `conv2d` with respect to its " # what
      # ", from the gradient of its result and its " # operand # "; the "
      # "attributes are the forward's.\n\n```mlir\n%d = cleave." # mnemonic
      # " %g, %" # operand # " {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, "
      # "dilation = array<i64: 1, 1>, groups = 1 : i64} : (...) -> tensor<...>\n```";
  let results = (outs Cleave_FloatTensor:$result);
}

def Cleave_Conv2dBackwardInputOp
    : Cleave_Conv2dBackwardOp<"conv2d_backward_input", "weight", "input"> {
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$weight,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups);
}

def Cleave_Conv2dBackwardWeightOp
    : Cleave_Conv2dBackwardOp<"conv2d_backward_weight", "input", "weight"> {
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$input,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups);
}

def Cleave_MaxPool2dBackwardOp : Cleave_BackwardOp<"max_pool2d_backward"> {
  let summary = "gradient of max_pool2d";
  let description = [{
    Routes each window's gradient to its first maximum in the forward input
    (a NaN wins), as PyTorch; overlapping windows add up.

    ```mlir
    %dx = cleave.max_pool2d_backward %g, %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>,
        padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, ceil_mode = false}
        : (tensor<1x64x8x8xf32>, tensor<1x64x16x16xf32>) -> tensor<1x64x16x16xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$stride,
                       DenseI64ArrayAttr:$padding, DenseI64ArrayAttr:$dilation,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode);
  let results = (outs Cleave_FloatTensor:$result);
}

def Cleave_AvgPool2dBackwardOp : Cleave_BackwardOp<"avg_pool2d_backward"> {
  let summary = "gradient of avg_pool2d";
  let description = [{
    Spreads each window's gradient over its elements, divided as the forward
    divides; the result has the forward input's shape.

    ```mlir
    %dx = cleave.avg_pool2d_backward %g {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>,
        padding = array<i64: 0, 0>, ceil_mode = false, count_include_pad = true}
        : (tensor<1x64x4x4xf32>) -> tensor<1x64x8x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                       DefaultValuedAttr<BoolAttr, "true">:$count_include_pad);
  let results = (outs Cleave_FloatTensor:$result);
}

def Cleave_AdaptiveAvgPool2dBackwardOp : Cleave_BackwardOp<"adaptive_avg_pool2d_backward"> {
  let summary = "gradient of adaptive_avg_pool2d";
  let description = [{
    Spreads each bin's gradient over its elements; the result has the
    forward input's shape.

    ```mlir
    %dx = cleave.adaptive_avg_pool2d_backward %g : (tensor<1x512x1x1xf32>) -> tensor<1x512x7x7xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$grad);
  let results = (outs Cleave_FloatTensor:$result);
}

def Cleave_GeluBackwardOp
    : Cleave_BackwardOp<"gelu_backward", [AllTypesMatch<["grad", "input", "result"]>],
                        ["getKernelAttributes"], ["getFlopsPerElement"]> {
  let summary = "gradient of gelu";
  let description = [{
    `grad * gelu'(input)` for the exact GELU or its tanh approximation, as
    PyTorch's `gelu_backward`.

    ```mlir
    %dx = cleave.gelu_backward %g, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$input,
      DefaultValuedAttr<Cleave_GeluApproximationAttr,
                        "::mlir::cleave::GeluApproximation::none">:$approximation);
  let results = (outs Cleave_FloatTensor:$result);
}

def Cleave_SiluBackwardOp
    : Cleave_BackwardOp<"silu_backward", [AllTypesMatch<["grad", "input", "result"]>], [],
                        ["getFlopsPerElement"]> {
  let summary = "gradient of silu";
  let description = [{
    `grad * s * (1 + x * (1 - s))` with `s = sigmoid(x)`, as PyTorch's
    `silu_backward`.

    ```mlir
    %dx = cleave.silu_backward %g, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$input);
  let results = (outs Cleave_FloatTensor:$result);
}

def Cleave_ReluBackwardOp
    : Cleave_BackwardOp<"relu_backward", [AllTypesMatch<["grad", "output", "result"]>], [],
                        ["getFlopsPerElement"]> {
  let summary = "gradient of relu, from its output";
  let description = [{
    `grad` where relu's `output` is positive, else 0 (NaN included), as
    PyTorch's `threshold_backward(grad, output, 0)`. One pass over two
    tensors: the comparison and select it stands for would write a mask and
    read it back.

    ```mlir
    %dx = cleave.relu_backward %g, %y : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$output);
  let results = (outs Cleave_FloatTensor:$result);
}

def Cleave_LinearBackwardWeightOp
    : Cleave_BackwardOp<"linear_backward_weight", [], [], ["getCost"]> {
  let summary = "gradient of a linear weight: grad^T input over the leading dims";
  let description = [{
    `result[n, k] = sum over the leading positions m of grad[m, n] * input[m, k]`
    for `grad [..., N]` and `input [..., K]` with the same leading dims: one
    GEMM, no transposed copies. It is also the gradient of a matmul's 2-D
    right operand.

    ```mlir
    %dw = cleave.linear_backward_weight %g, %x : (tensor<2x8x512xf32>, tensor<2x8x128xf32>) -> tensor<512x128xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$input);
  let results = (outs Cleave_FloatTensor:$result);
}

def Cleave_SliceBackwardOp
    : Cleave_BackwardOp<"slice_backward", [], [], ["getFlopsPerElement"]> {
  let summary = "gradient of slice: the gradient placed in a zero tensor";
  let description = [{
    A tensor of the result's shape (the sliced input's) that holds `grad` at
    the indices `start, start + step, ...` of dim `dim` and zero elsewhere.

    ```mlir
    %dx = cleave.slice_backward %g {dim = 2 : i64, start = 0 : i64, end = 128 : i64, step = 1 : i64}
        : (tensor<2x8x128xf32>) -> tensor<2x8x384xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$grad, I64Attr:$dim, I64Attr:$start, I64Attr:$end,
                       DefaultValuedAttr<I64Attr, "1">:$step);
  let results = (outs Cleave_Tensor:$result);
}

//===----------------------------------------------------------------------===//
// Optimizer updates.
//===----------------------------------------------------------------------===//

def Cleave_AdamWOp : Cleave_UpdateOp<"adamw"> {
  let summary = "one torch.optim.AdamW step of one parameter";
  let description = [{
    Updates `param` and its moments `exp_avg`, `exp_avg_sq` in place with
    `grad` (times `grad_scale` when given, the clipping factor) at step `t`,
    the value of `step` (1 for the first update), with decoupled weight decay
    and bias correction, as `torch.optim.AdamW`. The learning rate of step t
    is `lr * schedule(t - 1)` (docs/training.md).

    Example:

    ```mlir
    cleave.adamw %w, %g, %m, %v, %step {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
        eps = 1.0e-08 : f64, weight_decay = 1.0e-02 : f64, schedule = "constant",
        warmup_steps = 0 : i64, decay_steps = 0 : i64}
        : tensor<512x128xf32>, tensor<512x128xf32>, tensor<512x128xf32>, tensor<512x128xf32>, tensor<i64>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$param, Cleave_FloatTensor:$grad,
                       Cleave_FloatTensor:$exp_avg, Cleave_FloatTensor:$exp_avg_sq,
                       Cleave_StepTensor:$step, Optional<Cleave_ScaleTensor>:$grad_scale,
                       F64Attr:$lr, F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay, StrAttr:$schedule, I64Attr:$warmup_steps,
                       I64Attr:$decay_steps);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $step (`grad_scale` $grad_scale^)?
    attr-dict `:` type(operands)
  }];
}

def Cleave_SgdOp : Cleave_UpdateOp<"sgd", [AttrSizedOperandSegments]> {
  let summary = "one torch.optim.SGD step of one parameter";
  let description = [{
    Updates `param` (and `momentum_buffer`, present exactly when
    `momentum != 0`) in place with `grad` (times `grad_scale` when given) at
    step `t`, the value of `step`, as `torch.optim.SGD`: weight decay,
    momentum with dampening, Nesterov; the buffer is the gradient itself at
    t = 1. The learning rate of step t is `lr * schedule(t - 1)`.

    Example:

    ```mlir
    cleave.sgd %w, %g step %step {lr = 1.0e-01 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64,
        nesterov = false, weight_decay = 0.0 : f64, schedule = "constant",
        warmup_steps = 0 : i64, decay_steps = 0 : i64}
        : tensor<512x128xf32>, tensor<512x128xf32>, tensor<i64>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$param, Cleave_FloatTensor:$grad,
                       Optional<Cleave_FloatTensor>:$momentum_buffer,
                       Cleave_StepTensor:$step, Optional<Cleave_ScaleTensor>:$grad_scale,
                       F64Attr:$lr, F64Attr:$momentum, F64Attr:$dampening, BoolAttr:$nesterov,
                       F64Attr:$weight_decay, StrAttr:$schedule, I64Attr:$warmup_steps,
                       I64Attr:$decay_steps);
  let assemblyFormat = [{
    $param `,` $grad (`momentum_buffer` $momentum_buffer^)? `step` $step
    (`grad_scale` $grad_scale^)? attr-dict `:` type(operands)
  }];
}

#endif // CLEAVE_TRAINING_OPS_TD
