// RUN: cleave-opt %s -cleave-reduce-gradients="ranks=4" | FileCheck %s --check-prefix=FUSED
// RUN: cleave-opt %s -cleave-reduce-gradients="ranks=4 bucket-bytes=48" | FileCheck %s --check-prefix=SPLIT
// RUN: cleave-opt %s -cleave-reduce-gradients="ranks=1" | FileCheck %s --check-prefix=ONE
// RUN: cleave-opt %s -cleave-reduce-gradients="ranks=4 bucket-bytes=48" -cleave-add-optimizer="early-updates=true" | FileCheck %s --check-prefix=EARLY

// The loss is averaged right where it is computed. One bucket: both
// gradients flattened into one buffer after the later of them (b's, which
// backward finishes first, then w's), summed over the dp group, scaled by
// 1/4 and cut back.
// FUSED-LABEL: func.func @step
// FUSED: %[[L:.*]] = cleave.reduce_sum
// FUSED-NEXT: %[[LSUM:.*]] = cleave.all_reduce %[[L]] {group = "dp"} : tensor<f32> -> tensor<f32>
// FUSED-NEXT: %[[Q2:.*]] = cleave.constant dense<2.500000e-01> : tensor<f32>
// FUSED-NEXT: %[[LOSS:.*]] = cleave.mul %[[LSUM]], %[[Q2]]
// FUSED-NEXT: %[[GB:.*]] = cleave.neg %{{.*}} {cleave.phase = "backward"} : tensor<4xf32>
// FUSED: %[[GW:.*]] = cleave.relu
// FUSED-NEXT: %[[FW:.*]] = cleave.reshape %[[GW]] : tensor<4x3xf32> to tensor<12xf32>
// FUSED-NEXT: %[[PACK:.*]] = cleave.concat %[[GB]], %[[FW]] {dim = 0 : i64} : (tensor<4xf32>, tensor<12xf32>) -> tensor<16xf32>
// FUSED-NEXT: %[[SUM:.*]] = cleave.all_reduce %[[PACK]] {group = "dp"} : tensor<16xf32> -> tensor<16xf32>
// FUSED-NEXT: %[[QUARTER:.*]] = cleave.constant dense<2.500000e-01> : tensor<f32>
// FUSED-NEXT: %[[MEAN:.*]] = cleave.mul %[[SUM]], %[[QUARTER]]
// FUSED-NEXT: %[[B:.*]] = cleave.slice %[[MEAN]] {dim = 0 : i64, end = 4 : i64, start = 0 : i64}
// FUSED-NEXT: %[[W0:.*]] = cleave.slice %[[MEAN]] {dim = 0 : i64, end = 16 : i64, start = 4 : i64}
// FUSED-NEXT: %[[W:.*]] = cleave.reshape %[[W0]] : tensor<12xf32> to tensor<4x3xf32>
// FUSED-NEXT: return %[[LOSS]], %[[W]], %[[B]]

// Buckets of at most 48 bytes: b's gradient (16 bytes) goes alone as soon
// as backward has it, before w's is computed; w's (48 bytes) is a bucket
// of its own.
// SPLIT-LABEL: func.func @step
// SPLIT: %[[GB:.*]] = cleave.neg
// SPLIT-NEXT: %[[SB:.*]] = cleave.all_reduce %[[GB]] {group = "dp"} : tensor<4xf32>
// SPLIT: %[[GW:.*]] = cleave.relu
// SPLIT-NEXT: %[[FW:.*]] = cleave.reshape %[[GW]] : tensor<4x3xf32> to tensor<12xf32>
// SPLIT-NEXT: cleave.all_reduce %[[FW]] {group = "dp"} : tensor<12xf32>
// SPLIT-NOT: cleave.slice
// SPLIT: return

// One rank: nothing to reduce.
// ONE-NOT: cleave.all_reduce

// The updates follow the reduced gradients, each right after its bucket.
// EARLY-LABEL: func.func @step
// EARLY: %[[SB:.*]] = cleave.all_reduce %{{.*}} {group = "dp"} : tensor<4xf32>
// EARLY-NEXT: cleave.constant
// EARLY-NEXT: %[[B:.*]] = cleave.mul %[[SB]]
// EARLY: cleave.adamw %{{.*}}, %[[B]],
// EARLY: cleave.all_reduce %{{.*}} {group = "dp"} : tensor<12xf32>
// EARLY: cleave.adamw

func.func @step(%x: tensor<2x3xf32>) -> (tensor<f32> {cleave.name = "loss"}, tensor<4x3xf32> {cleave.gradient_of = "w", cleave.name = "grad.w"}, tensor<4xf32> {cleave.gradient_of = "b", cleave.name = "grad.b"}) {
  %w = cleave.param "w" : tensor<4x3xf32>
  %b = cleave.param "b" : tensor<4xf32>
  %y = cleave.linear %x, %w, %b : tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32> -> tensor<2x4xf32>
  %l = cleave.reduce_sum %y {dims = array<i64: 0, 1>} : tensor<2x4xf32> -> tensor<f32>
  %gb = cleave.neg %b {cleave.phase = "backward"} : tensor<4xf32>
  %gw = cleave.relu %w : tensor<4x3xf32>
  return %l, %gw, %gb : tensor<f32>, tensor<4x3xf32>, tensor<4xf32>
}

