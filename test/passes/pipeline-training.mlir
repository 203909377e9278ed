// RUN: cleave-opt %s -cleave-differentiate -cleave-pipeline-training | FileCheck %s

// Two layers on two stages, 1F1B over 2 microbatches, the relu recomputed.
// Stage 0: one warm-up forward (pp - 1 - 0), then one forward and one backward, then the last
// backward; each forward sends its activation; each backward
// receives the activation's gradient, recomputes the relu from the kept linear output, and
// the weight's gradient is summed over the microbatches and halved.
// CHECK-LABEL: func.func @train_stage0
// CHECK-SAME: (%[[X0:.*]]: tensor<4x5xf32> {cleave.name = "x", cleave.phase_chunk = 0 : i64, cleave.phase_microbatch = 0 : i64}, %[[X1:.*]]: tensor<4x5xf32> {cleave.name = "x", cleave.phase_chunk = 0 : i64, cleave.phase_microbatch = 1 : i64})
// CHECK-SAME: -> (tensor<5x5xf32> {cleave.gradient_of = "l0.weight", cleave.name = "grad.l0.weight"})
// CHECK-SAME: attributes {cleave.pipeline = {free_tag = {{[0-9]+}} : i64, stages = 2 : i64}, cleave.stage = 0 : i64
// CHECK-DAG: %[[W:.*]] = cleave.param "l0.weight"
// CHECK-DAG: %[[HALF:.*]] = cleave.constant dense<5.000000e-01>
// CHECK: %[[Y0:.*]] = cleave.linear %[[X0]], %[[W]] {cleave.phase = "forward", cleave.phase_chunk = 0 : i64, cleave.phase_microbatch = 0 : i64
// CHECK: %[[R0:.*]] = cleave.relu %[[Y0]]
// CHECK: cleave.send %[[R0]] {peer = 1 : i64, tag = [[$ACT:[0-9]+]] : i64}
// CHECK: %[[Y1:.*]] = cleave.linear %[[X1]], %[[W]] {cleave.phase = "forward", cleave.phase_chunk = 0 : i64, cleave.phase_microbatch = 1 : i64
// CHECK: cleave.send
// CHECK: %[[G0:.*]] = cleave.recv {cleave.phase = "backward", cleave.phase_chunk = 0 : i64, cleave.phase_microbatch = 0 : i64, peer = 1 : i64, tag = [[$GRAD:[0-9]+]] : i64}
// CHECK: cleave.relu %[[Y0]]
// CHECK: %[[D0:.*]] = cleave.linear_backward_weight {{.*}}, %[[X0]]
// CHECK: cleave.recv {cleave.phase = "backward", cleave.phase_chunk = 0 : i64, cleave.phase_microbatch = 1 : i64
// CHECK: cleave.relu %[[Y1]]
// CHECK: %[[D1:.*]] = cleave.linear_backward_weight {{.*}}, %[[X1]]
// CHECK: %[[SUM:.*]] = cleave.add %[[D0]], %[[D1]]
// CHECK: %[[MEAN:.*]] = cleave.mul %[[SUM]], %[[HALF]]
// CHECK: return %[[MEAN]]
// Stage 1 (the last): forward then backward of each microbatch in turn, the loss the mean
// of the microbatches' losses, the gradient sent back with its own tag.
// CHECK-LABEL: func.func @train_stage1()
// CHECK-SAME: -> (tensor<f32> {cleave.name = "loss"}, tensor<3x5xf32> {cleave.gradient_of = "l1.weight", cleave.name = "grad.l1.weight"})
// CHECK: cleave.param "l1.weight"
// CHECK: %[[A0:.*]] = cleave.recv {cleave.phase = "forward", cleave.phase_chunk = 1 : i64, cleave.phase_microbatch = 0 : i64, peer = 0 : i64, tag = [[$ACT]] : i64}
// CHECK: %[[L0:.*]] = cleave.reduce_sum
// CHECK: cleave.reshape {{.*}}cleave.phase = "backward", cleave.phase_chunk = 1 : i64, cleave.phase_microbatch = 0 : i64
// CHECK: cleave.send {{.*}} {peer = 0 : i64, tag = [[$GRAD]] : i64}
// CHECK: cleave.recv {cleave.phase = "forward", cleave.phase_chunk = 1 : i64, cleave.phase_microbatch = 1 : i64
// CHECK: %[[L1:.*]] = cleave.reduce_sum
// CHECK: %[[LS:.*]] = cleave.add %[[L0]], %[[L1]]
// CHECK: %[[LOSS:.*]] = cleave.mul %[[LS]]
// CHECK: cleave.phase = "backward", cleave.phase_chunk = 1 : i64, cleave.phase_microbatch = 1 : i64
// CHECK: return %[[LOSS]]
// CHECK-NOT: func.func @forward
module attributes {cleave.mesh = {pp = 2 : i64, tp = 1 : i64, dp = 1 : i64}, cleave.schedule = {kind = "1f1b", microbatches = 2 : i64, virtual_stages = 1 : i64, microbatch_size = 4 : i64}} {
func.func @forward(%x: tensor<4x5xf32> {cleave.name = "x"}) -> (tensor<f32> {cleave.name = "loss"}) {
  %w0 = cleave.param "l0.weight" : tensor<5x5xf32>
  %w1 = cleave.param "l1.weight" : tensor<3x5xf32>
  %y = cleave.linear %x, %w0 {cleave.stage = 0 : i64} : tensor<4x5xf32>, tensor<5x5xf32> -> tensor<4x5xf32>
  %r = cleave.relu %y {cleave.stage = 0 : i64, cleave.recompute} : tensor<4x5xf32>
  %z = cleave.linear %r, %w1 {cleave.stage = 1 : i64} : tensor<4x5xf32>, tensor<3x5xf32> -> tensor<4x3xf32>
  %l = cleave.reduce_sum %z {dims = array<i64: 0, 1>} : tensor<4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
}
