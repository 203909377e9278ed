// RUN: cleave-opt %s -cleave-sync-batch-norm="ranks=2" | FileCheck %s
// RUN: cleave-opt %s -cleave-sync-batch-norm="ranks=1" | FileCheck %s --check-prefix=ONE
// RUN: cleave-opt %s -cleave-sync-batch-norm="ranks=2" -cleave-append-loss -cleave-differentiate | FileCheck %s --check-prefix=BACKWARD

// The statistics of the whole batch: each per-channel sum is summed over
// the dp group and divided by the global count (2 ranks x 2 x 3 x 3 = 36);
// the variance takes the centered squares (two passes); the running
// statistics' update counts 36 values.
// CHECK-LABEL: func.func @step
// CHECK: %[[XS:.*]] = cleave.mul %arg0
// CHECK-NEXT: %[[SUM:.*]] = cleave.reduce_sum %[[XS]] {dims = array<i64: 0, 2, 3>, keepdim = true} : tensor<2x4x3x3xf32> -> tensor<1x4x1x1xf32>
// CHECK-NEXT: %[[TOTAL:.*]] = cleave.all_reduce %[[SUM]] {group = "dp"}
// CHECK-NEXT: %[[INV:.*]] = cleave.constant dense<0.027777778> : tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = cleave.mul %[[TOTAL]], %[[INV]]
// CHECK-NEXT: %[[C:.*]] = cleave.sub %[[XS]], %[[MEAN]]
// CHECK-NEXT: %[[SQ:.*]] = cleave.mul %[[C]], %[[C]]
// CHECK-NEXT: %[[SQSUM:.*]] = cleave.reduce_sum %[[SQ]]
// CHECK-NEXT: cleave.all_reduce %[[SQSUM]] {group = "dp"}
// CHECK: cleave.rsqrt
// CHECK-NOT: cleave.batch_norm_train
// CHECK: cleave.update_running_stats {{.*}} {count = 36 : i64, momentum = 1.000000e-01 : f64}

// ONE: cleave.batch_norm_train
// ONE: count = 18 : i64

// Backward sums the statistics' gradients over the ranks (the input depends
// on a parameter, so its gradient flows through them): the all_reduce's
// gradient is an all_reduce.
// BACKWARD-LABEL: func.func @step
// BACKWARD: cleave.all_reduce {{.*}} {group = "dp"}
// BACKWARD: cleave.all_reduce {{.*}} {group = "dp"}
// BACKWARD: cleave.phase = "backward"
// BACKWARD: cleave.all_reduce {{.*}} {group = "dp"}
// BACKWARD: cleave.all_reduce {{.*}} {group = "dp"}
func.func @step(%x: tensor<2x4x3x3xf32>) -> tensor<f32> {
  %w = cleave.param "bn.weight" : tensor<4xf32>
  %b = cleave.param "bn.bias" : tensor<4xf32>
  %rm = cleave.param "bn.running_mean" {buffer} : tensor<4xf32>
  %rv = cleave.param "bn.running_var" {buffer} : tensor<4xf32>
  %s = cleave.param "scale" : tensor<2x4x3x3xf32>
  %xs = cleave.mul %x, %s : tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32> -> tensor<2x4x3x3xf32>
  %y, %mean, %var = cleave.batch_norm_train %xs weight %w bias %b {eps = 1.0e-05 : f64} : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  cleave.update_running_stats %rm, %rv, %mean, %var {momentum = 0.1 : f64, count = 18 : i64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  %l = cleave.reduce_sum %y {dims = array<i64: 0, 1, 2, 3>} : tensor<2x4x3x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// In a pipeline the ops written in its place run where the batch norm ran
// (stage and chunk), and inherit its recomputation mark except the
// all_reduces: backward keeps their small statistics instead of reducing
// again.
// CHECK-LABEL: func.func @placed
// CHECK: cleave.reduce_sum {{.*}}cleave.chunk = 1 : i64, cleave.recompute, cleave.stage = 1 : i64
// CHECK-NEXT: cleave.all_reduce
// CHECK-SAME: {cleave.chunk = 1 : i64, cleave.stage = 1 : i64, group = "dp"}
// CHECK: cleave.rsqrt {{.*}}cleave.chunk = 1 : i64, cleave.recompute, cleave.stage = 1 : i64
// CHECK-NOT: cleave.batch_norm_train
func.func @placed(%x: tensor<2x4x3x3xf32>) -> tensor<f32> {
  %w = cleave.param "bn.weight" : tensor<4xf32>
  %y, %mean, %var = cleave.batch_norm_train %x weight %w {eps = 1.0e-05 : f64, cleave.stage = 1 : i64, cleave.chunk = 1 : i64, cleave.recompute} : (tensor<2x4x3x3xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %l = cleave.reduce_sum %y {dims = array<i64: 0, 1, 2, 3>} : tensor<2x4x3x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
