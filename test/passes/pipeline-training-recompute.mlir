// RUN: cleave-opt %s -cleave-differentiate -cleave-pipeline-training -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s

// Recomputation on one stage (no pipeline): two layers, every op marked. A backward slot
// recomputes one layer's ops from the layer's input, which forward keeps: blocks.1's backward
// recomputes its linear and relu from blocks.0's output (kept), nothing of blocks.0; blocks.0's
// backward reads that kept output too (its relu's gradient needs only the output), so nothing of
// blocks.0 is computed again.
// CHECK-LABEL: func.func @train_stage0
// CHECK: %[[Y0:.*]] = cleave.linear %{{.*}} {cleave.phase = "forward"
// CHECK: %[[R0:.*]] = cleave.relu %[[Y0]] {{.*}}loc("blocks.0.act")
// CHECK: %[[Y1:.*]] = cleave.linear %[[R0]], {{.*}}loc("blocks.1.fc")
// CHECK: cleave.relu %[[Y1]] {{.*}}loc("blocks.1.act")
// CHECK: cleave.phase = "backward"
// CHECK: %[[Y1AGAIN:.*]] = cleave.linear %[[R0]], {{.*}}loc("blocks.1.fc")
// CHECK: %[[R1AGAIN:.*]] = cleave.relu %[[Y1AGAIN]] {{.*}}loc("blocks.1.act")
// CHECK: cleave.relu_backward %{{.*}}, %[[R1AGAIN]]
// CHECK: cleave.linear_backward_weight %{{.*}}, %[[R0]]
// CHECK: cleave.relu_backward %{{.*}}, %[[R0]]
// CHECK-NOT: cleave.linear %{{.*}}loc("blocks.0.fc")
// CHECK: return
module attributes {cleave.mesh = {pp = 1 : i64, tp = 1 : i64, dp = 1 : i64}, cleave.schedule = {kind = "1f1b", microbatches = 1 : i64, virtual_stages = 1 : i64, microbatch_size = 4 : i64}} {
func.func @forward(%x: tensor<4x5xf32> {cleave.name = "x"}) -> (tensor<f32> {cleave.name = "loss"}) {
  %w0 = cleave.param "blocks.0.fc.weight" : tensor<5x5xf32>
  %w1 = cleave.param "blocks.1.fc.weight" : tensor<5x5xf32>
  %y0 = cleave.linear %x, %w0 {cleave.stage = 0 : i64, cleave.recompute} : tensor<4x5xf32>, tensor<5x5xf32> -> tensor<4x5xf32> loc("blocks.0.fc")
  %r0 = cleave.relu %y0 {cleave.stage = 0 : i64, cleave.recompute} : tensor<4x5xf32> loc("blocks.0.act")
  %y1 = cleave.linear %r0, %w1 {cleave.stage = 0 : i64, cleave.recompute} : tensor<4x5xf32>, tensor<5x5xf32> -> tensor<4x5xf32> loc("blocks.1.fc")
  %r1 = cleave.relu %y1 {cleave.stage = 0 : i64, cleave.recompute} : tensor<4x5xf32> loc("blocks.1.act")
  %l = cleave.reduce_sum %r1 {dims = array<i64: 0, 1>} : tensor<4x5xf32> -> tensor<f32> loc("head")
  return %l : tensor<f32>
}
}
