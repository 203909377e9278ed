// RUN: cleave-opt %s -cleave-reduce-gradients="ranks=3 shard=true" | FileCheck %s --check-prefix=SCATTER
// RUN: cleave-opt %s -cleave-reduce-gradients="ranks=3 shard=true" -cleave-add-optimizer="optimizer=sgd lr=0.1 momentum=0.9" | FileCheck %s --check-prefix=UPDATE
// RUN: cleave-opt %s -cleave-reduce-gradients="ranks=3 shard=true" -cleave-add-optimizer="optimizer=sgd lr=0.1 gather-bytes=60" | FileCheck %s --check-prefix=SMALL
// RUN: cleave-opt %s -cleave-reduce-gradients="ranks=3 shard=true" -cleave-add-optimizer="clip-grad-norm=1.0" | FileCheck %s --check-prefix=CLIP
// RUN: cleave-opt %s -cleave-reduce-gradients="ranks=3 shard=true" -cleave-add-optimizer -cleave-plan-memory | FileCheck %s --check-prefix=PLANNED
// RUN: cleave-opt %s -cleave-reduce-gradients="ranks=3 shard=true" -cleave-shard-parameters="ranks=3" -cleave-add-optimizer="optimizer=sgd lr=0.1 momentum=0.9" | FileCheck %s --check-prefix=PARAMS
// RUN: not cleave-opt %s -cleave-shard-parameters="ranks=3" 2>&1 | FileCheck %s --check-prefix=UNSHARDED
// RUN: not cleave-opt %s -cleave-reduce-gradients="ranks=2 shard=true" -cleave-shard-parameters="ranks=3" 2>&1 | FileCheck %s --check-prefix=OTHER-RANKS

// ZeRO over 3 ranks. Each gradient is flattened, zero-padded to a multiple of
// 3 and viewed as [3, k] (b: 4 -> 6 elements, k = 2; w: 12, k = 4); the
// bucket concatenates the views along dim 1 and one reduce_scatter leaves
// each rank its row. The results are the flat parts, marked cleave.shard.
// SCATTER-LABEL: func.func @step
// SCATTER-SAME: tensor<4xf32> {cleave.gradient_of = "w", cleave.name = "grad.w", cleave.shard = {group = "dp", ranks = 3 : i64}}
// SCATTER-SAME: tensor<2xf32> {cleave.gradient_of = "b", cleave.name = "grad.b", cleave.shard = {group = "dp", ranks = 3 : i64}}
// SCATTER: %[[GB:.*]] = cleave.neg
// SCATTER: %[[GW:.*]] = cleave.relu
// SCATTER-NEXT: %[[ZERO:.*]] = cleave.constant dense<0.000000e+00>
// SCATTER-NEXT: %[[PAD:.*]] = cleave.broadcast_to %[[ZERO]] : tensor<f32> to tensor<2xf32>
// SCATTER-NEXT: %[[FB:.*]] = cleave.concat %[[GB]], %[[PAD]] {dim = 0 : i64} : (tensor<4xf32>, tensor<2xf32>) -> tensor<6xf32>
// SCATTER-NEXT: %[[RB:.*]] = cleave.reshape %[[FB]] : tensor<6xf32> to tensor<3x2xf32>
// SCATTER-NEXT: %[[RW:.*]] = cleave.reshape %[[GW]] : tensor<4x3xf32> to tensor<3x4xf32>
// SCATTER-NEXT: %[[PACK:.*]] = cleave.concat %[[RB]], %[[RW]] {dim = 1 : i64} : (tensor<3x2xf32>, tensor<3x4xf32>) -> tensor<3x6xf32>
// SCATTER-NEXT: %[[ROW:.*]] = cleave.reduce_scatter %[[PACK]] {blocks = 1 : i64, dim = 0 : i64, group = "dp"} : tensor<3x6xf32> -> tensor<1x6xf32>
// SCATTER-NEXT: cleave.constant dense<0.333333343>
// SCATTER-NEXT: %[[MEAN:.*]] = cleave.mul %[[ROW]]
// SCATTER-NEXT: %[[B0:.*]] = cleave.slice %[[MEAN]] {dim = 1 : i64, end = 2 : i64, start = 0 : i64}
// SCATTER-NEXT: %[[B:.*]] = cleave.reshape %[[B0]] : tensor<1x2xf32> to tensor<2xf32>
// SCATTER-NEXT: %[[W0:.*]] = cleave.slice %[[MEAN]] {dim = 1 : i64, end = 6 : i64, start = 2 : i64}
// SCATTER-NEXT: %[[W:.*]] = cleave.reshape %[[W0]] : tensor<1x4xf32> to tensor<4xf32>
// SCATTER-NEXT: return %{{.*}}, %[[W]], %[[B]]

// The update runs on the rank's part of the parameter: cut from it into a
// state (the optimizer writes persistent tensors in place) and updated with
// the part of the gradient and a sharded momentum buffer. At the end of the
// step the updated parts (read again after their update) are packed side by
// side, gathered in one all_gather ([3, 6]: row r is rank r's parts), and
// each parameter's columns go back into it, the padding dropped.
// UPDATE-DAG: %[[W:.*]] = cleave.param "w" : tensor<4x3xf32>
// UPDATE-DAG: %[[B:.*]] = cleave.param "b" : tensor<4xf32>
// UPDATE-DAG: %[[PW:.*]] = cleave.state "zero.param_shard.w" {cleave.shard = {group = "dp", param = "w", ranks = 3 : i64, shape = array<i64: 4, 3>}} : tensor<4xf32>
// UPDATE-DAG: %[[MW:.*]] = cleave.state "optimizer.momentum_buffer.w" {cleave.shard = {group = "dp", ranks = 3 : i64, shape = array<i64: 4, 3>}} : tensor<4xf32>
// UPDATE-DAG: %[[PB:.*]] = cleave.state "zero.param_shard.b" {{.*}} : tensor<2xf32>
// UPDATE: %[[RW:.*]] = cleave.reshape %[[W]] : tensor<4x3xf32> to tensor<3x4xf32>
// UPDATE-NEXT: %[[SW:.*]] = cleave.shard %[[RW]] {blocks = 1 : i64, dim = 0 : i64, group = "dp"} : tensor<3x4xf32> -> tensor<1x4xf32>
// UPDATE-NEXT: %[[FW:.*]] = cleave.reshape %[[SW]] : tensor<1x4xf32> to tensor<4xf32>
// UPDATE-NEXT: cleave.assign %[[PW]], %[[FW]] : tensor<4xf32>
// UPDATE-NEXT: %[[PW2:.*]] = cleave.state "zero.param_shard.w"
// UPDATE-NEXT: cleave.sgd %[[PW2]], %{{.*}} momentum_buffer %[[MW]]
// UPDATE-NOT: cleave.all_gather
// UPDATE: cleave.sgd
// UPDATE-NEXT: %[[UW:.*]] = cleave.state "zero.param_shard.w"
// UPDATE-NEXT: %[[UB:.*]] = cleave.state "zero.param_shard.b"
// UPDATE-NEXT: %[[PACK:.*]] = cleave.concat %[[UW]], %[[UB]] {dim = 0 : i64} : (tensor<4xf32>, tensor<2xf32>) -> tensor<6xf32>
// UPDATE-NEXT: %[[ALL:.*]] = cleave.all_gather %[[PACK]] {blocks = 1 : i64, dim = 0 : i64, group = "dp"} : tensor<6xf32> -> tensor<18xf32>
// UPDATE-NEXT: %[[ROWS:.*]] = cleave.reshape %[[ALL]] : tensor<18xf32> to tensor<3x6xf32>
// UPDATE-NEXT: %[[CW:.*]] = cleave.slice %[[ROWS]] {dim = 1 : i64, end = 4 : i64, start = 0 : i64} : tensor<3x6xf32> -> tensor<3x4xf32>
// UPDATE-NEXT: %[[NW:.*]] = cleave.reshape %[[CW]] : tensor<3x4xf32> to tensor<4x3xf32>
// UPDATE-NEXT: cleave.assign %[[W]], %[[NW]] : tensor<4x3xf32>
// UPDATE-NEXT: %[[CB:.*]] = cleave.slice %[[ROWS]] {dim = 1 : i64, end = 6 : i64, start = 4 : i64} : tensor<3x6xf32> -> tensor<3x2xf32>
// UPDATE-NEXT: %[[FB:.*]] = cleave.reshape %[[CB]] : tensor<3x2xf32> to tensor<6xf32>
// UPDATE-NEXT: %[[NB:.*]] = cleave.slice %[[FB]] {dim = 0 : i64, end = 4 : i64, start = 0 : i64} : tensor<6xf32> -> tensor<4xf32>
// UPDATE-NEXT: cleave.assign %[[B]], %[[NB]] : tensor<4xf32>
// UPDATE-NEXT: return

// Gathers of at most 60 bytes: w's 48 bytes alone, then b's.
// SMALL: cleave.all_gather %{{.*}} : tensor<4xf32> -> tensor<12xf32>
// SMALL: cleave.all_gather %{{.*}} : tensor<2xf32> -> tensor<6xf32>

// Clipping: the squares of the parts (their padding is zero) are summed over
// the ranks before the square root, so the norm is the global one.
// CLIP: cleave.reduce_sum
// CLIP: cleave.reduce_sum
// CLIP: %[[LOCAL:.*]] = cleave.add
// CLIP-NEXT: %[[GLOBAL:.*]] = cleave.all_reduce %[[LOCAL]] {group = "dp"} : tensor<f32> -> tensor<f32>
// CLIP-NEXT: cleave.sqrt %[[GLOBAL]]

// Every read of a state gets the state's one region.
// PLANNED: cleave.state "zero.param_shard.w" {{.*}}cleave.state_offset = [[OFF:[0-9]+]] : i64
// PLANNED: cleave.state "zero.param_shard.w" {{.*}}cleave.state_offset = [[OFF]] : i64
// PLANNED: cleave.state "zero.param_shard.w" {{.*}}cleave.state_offset = [[OFF]] : i64

// ZeRO-3: the parameters become the rank's parts (same names, tensor<k>,
// marked with the whole shape); each phase that reads one gathers it right
// before its first reader (b in forward and again in backward, where the
// gather takes over the phase mark; w in forward and backward), and the
// optimizer updates the part in place, with nothing to gather back.
// PARAMS-DAG: %[[W:.*]] = cleave.param "w" {cleave.shard = {group = "dp", ranks = 3 : i64, shape = array<i64: 4, 3>}} : tensor<4xf32>
// PARAMS-DAG: %[[B:.*]] = cleave.param "b" {cleave.shard = {group = "dp", ranks = 3 : i64, shape = array<i64: 4>}} : tensor<2xf32>
// PARAMS: %[[GW:.*]] = cleave.all_gather %[[W]] {blocks = 1 : i64, dim = 0 : i64, group = "dp"} : tensor<4xf32> -> tensor<12xf32>
// PARAMS-NEXT: %[[FW:.*]] = cleave.reshape %[[GW]] : tensor<12xf32> to tensor<4x3xf32>
// PARAMS-NEXT: %[[GB:.*]] = cleave.all_gather %[[B]] {{.*}} : tensor<2xf32> -> tensor<6xf32>
// PARAMS-NEXT: %[[FB:.*]] = cleave.slice %[[GB]] {dim = 0 : i64, end = 4 : i64, start = 0 : i64} : tensor<6xf32> -> tensor<4xf32>
// PARAMS-NEXT: cleave.linear %{{.*}}, %[[FW]], %[[FB]]
// PARAMS: %[[BB:.*]] = cleave.all_gather %[[B]] {blocks = 1 : i64, cleave.phase = "backward", dim = 0 : i64, group = "dp"}
// PARAMS-NEXT: %[[FBB:.*]] = cleave.slice %[[BB]]
// PARAMS-NEXT: cleave.neg %[[FBB]] : tensor<4xf32>
// PARAMS-NEXT: %[[BW:.*]] = cleave.all_gather %[[W]]
// PARAMS-NEXT: %[[FBW:.*]] = cleave.reshape %[[BW]]
// PARAMS-NEXT: cleave.relu %[[FBW]]
// PARAMS: cleave.sgd %[[W]], %{{.*}} momentum_buffer
// PARAMS-NOT: cleave.assign %[[W]]
// PARAMS: cleave.sgd %[[B]],
// PARAMS-NOT: cleave.all_gather
// PARAMS: return

// UNSHARDED: error: no sharded gradients: run -cleave-reduce-gradients{shard=true} first
// OTHER-RANKS: error: the gradient of 'w' is sharded as {group = "dp", ranks = 2 : i64}, not over 3 ranks

func.func @step(%x: tensor<2x3xf32>) -> (tensor<f32> {cleave.name = "loss"}, tensor<4x3xf32> {cleave.gradient_of = "w", cleave.name = "grad.w"}, tensor<4xf32> {cleave.gradient_of = "b", cleave.name = "grad.b"}) {
  %w = cleave.param "w" : tensor<4x3xf32>
  %b = cleave.param "b" : tensor<4xf32>
  %y = cleave.linear %x, %w, %b : tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32> -> tensor<2x4xf32>
  %l = cleave.reduce_sum %y {dims = array<i64: 0, 1>} : tensor<2x4xf32> -> tensor<f32>
  %gb = cleave.neg %b {cleave.phase = "backward"} : tensor<4xf32>
  %gw = cleave.relu %w : tensor<4x3xf32>
  return %l, %gw, %gb : tensor<f32>, tensor<4x3xf32>, tensor<4xf32>
}
