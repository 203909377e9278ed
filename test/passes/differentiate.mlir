// RUN: cleave-opt %s -split-input-file -cleave-differentiate -verify-diagnostics | FileCheck %s

// A linear layer: the weight's gradient is one GEMM over the batch
// (linear_backward_weight), the bias's a sum over it, the input gets none
// (it is data). Results: the loss, then the parameters' gradients in the
// order the parameters appear; the first backward op is marked.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: -> (tensor<f32> {cleave.name = "loss"}, tensor<3xf32> {cleave.gradient_of = "fc.bias", cleave.name = "grad.fc.bias"}, tensor<3x5xf32> {cleave.gradient_of = "fc.weight", cleave.name = "grad.fc.weight"})
// CHECK: %[[B:.*]] = cleave.param "fc.bias"
// CHECK: %[[W:.*]] = cleave.param "fc.weight"
// CHECK: %[[Y:.*]] = cleave.linear %arg0, %[[W]], %[[B]]
// CHECK: %[[R:.*]] = cleave.relu %[[Y]]
// CHECK: %[[LOSS:.*]] = cleave.reduce_sum %[[R]]
// CHECK: %[[ONE:.*]] = cleave.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[K:.*]] = cleave.reshape %[[ONE]] {cleave.phase = "backward"} : tensor<f32> to tensor<1x1xf32>
// CHECK: %[[G:.*]] = cleave.broadcast_to %[[K]] : tensor<1x1xf32> to tensor<4x3xf32>
// CHECK: %[[GY:.*]] = cleave.relu_backward %[[G]], %[[R]] : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NOT: cleave.matmul
// CHECK: %[[DW:.*]] = cleave.linear_backward_weight %[[GY]], %arg0 : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
// CHECK: %[[DB:.*]] = cleave.reduce_sum %[[GY]] {dims = array<i64: 0>} : tensor<4x3xf32> -> tensor<3xf32>
// CHECK: return %[[LOSS]], %[[DB]], %[[DW]]
func.func @mlp(%x: tensor<4x5xf32> {cleave.name = "x"}) -> (tensor<f32> {cleave.name = "loss"}) {
  %b = cleave.param "fc.bias" : tensor<3xf32>
  %w = cleave.param "fc.weight" : tensor<3x5xf32>
  %y = cleave.linear %x, %w, %b : tensor<4x5xf32>, tensor<3x5xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %r = cleave.relu %y : tensor<4x3xf32>
  %l = cleave.reduce_sum %r {dims = array<i64: 0, 1>} : tensor<4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A broadcast operand's gradient is summed back to its shape; a value read
// twice (the scale) sums its gradients; a buffer and an unused parameter
// get none.
// CHECK-LABEL: func.func @broadcast_and_reuse
// CHECK-SAME: -> (tensor<f32> {cleave.name = "loss"}, tensor<8xf32> {cleave.gradient_of = "scale", cleave.name = "grad.scale"})
// CHECK: %[[S:.*]] = cleave.param "scale"
// CHECK: %[[Y:.*]] = cleave.mul %arg0, %[[S]]
// CHECK: %[[Z:.*]] = cleave.mul %[[Y]], %[[S]]
// CHECK: %[[G:.*]] = cleave.broadcast_to %{{.*}} : tensor<1x1xf32> to tensor<4x8xf32>
// CHECK: %[[DS2:.*]] = cleave.mul %[[G]], %[[Y]]
// CHECK: %[[DY:.*]] = cleave.mul %[[G]], %[[S]]
// CHECK: %[[R2:.*]] = cleave.reduce_sum %[[DS2]] {dims = array<i64: 0>, keepdim = true} : tensor<4x8xf32> -> tensor<1x8xf32>
// CHECK: %[[S2:.*]] = cleave.reshape %[[R2]] : tensor<1x8xf32> to tensor<8xf32>
// CHECK: %[[DS1:.*]] = cleave.mul %[[DY]], %arg0
// CHECK: %[[R1:.*]] = cleave.reduce_sum %[[DS1]]
// CHECK: %[[S1:.*]] = cleave.reshape %[[R1]]
// CHECK: %[[SUM:.*]] = cleave.add %[[S2]], %[[S1]]
// CHECK: return %{{.*}}, %[[SUM]]
func.func @broadcast_and_reuse(%x: tensor<4x8xf32> {cleave.name = "x"}) -> (tensor<f32> {cleave.name = "loss"}) {
  %s = cleave.param "scale" : tensor<8xf32>
  %m = cleave.param "stats" {buffer} : tensor<8xf32>
  %u = cleave.param "unused" : tensor<8xf32>
  %y = cleave.mul %x, %s : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %z = cleave.mul %y, %s : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %w = cleave.add %z, %m : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %l = cleave.reduce_sum %w {dims = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A matmul by a 2-D weight differentiates into a linear and one GEMM for
// the weight, with no transposed copies.
// CHECK-LABEL: func.func @matmul_2d
// CHECK: %[[X:.*]] = cleave.mul %arg0
// CHECK: cleave.linear %{{.*}}, %[[W:.*]] : tensor<2x3x6xf32>, tensor<4x6xf32> -> tensor<2x3x4xf32>
// CHECK: cleave.linear_backward_weight %[[X]], %{{.*}} : (tensor<2x3x4xf32>, tensor<2x3x6xf32>) -> tensor<4x6xf32>
// CHECK-NOT: cleave.permute
func.func @matmul_2d(%x: tensor<2x3x4xf32>) -> tensor<f32> {
  %a = cleave.param "a" : tensor<4xf32>
  %w = cleave.param "w" : tensor<4x6xf32>
  %xa = cleave.mul %x, %a : tensor<2x3x4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
  %y = cleave.matmul %xa, %w : tensor<2x3x4xf32>, tensor<4x6xf32> -> tensor<2x3x6xf32>
  %l = cleave.reduce_mean %y {dims = array<i64: 0, 1, 2>} : tensor<2x3x6xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An op without a gradient rule is an error at its location.
func.func @no_rule(%x: tensor<2x3x4x4xf32>) -> tensor<f32> {
  %rm = cleave.param "bn.running_mean" {buffer} : tensor<3xf32>
  %rv = cleave.param "bn.running_var" {buffer} : tensor<3xf32>
  %w = cleave.param "bn.weight" : tensor<3xf32>
  // expected-error @+1 {{no gradient rule for cleave.batch_norm}}
  %y = cleave.batch_norm %x, %rm, %rv weight %w {eps = 1.0e-05 : f64}
      : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %l = cleave.reduce_sum %y {dims = array<i64: 0, 1, 2, 3>} : tensor<2x3x4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{the loss does not depend on any trainable parameter}}
func.func @constant_loss(%x: tensor<4xf32>) -> tensor<f32> {
  %w = cleave.param "w" : tensor<4xf32>
  %l = cleave.reduce_sum %x {dims = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{cleave-differentiate needs a function that returns one value, the loss}}
func.func @two_results(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  return %x, %x : tensor<4xf32>, tensor<4xf32>
}

// -----

// The gradients of slices that tile a dim (q, k, v of one projection) are
// concatenated, not added as zero-filled tensors; slices that leave a gap
// are summed.
// CHECK-LABEL: func.func @split_qkv
// CHECK-NOT: cleave.slice_backward
// CHECK: cleave.concat %{{.*}}, %{{.*}}, %{{.*}} {dim = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x12xf32>
// CHECK-LABEL: func.func @gap
// CHECK: cleave.slice_backward
// CHECK: cleave.slice_backward
// CHECK: cleave.add
func.func @split_qkv(%x: tensor<2x12xf32>) -> tensor<f32> {
  %w = cleave.param "w" : tensor<12xf32>
  %y = cleave.mul %x, %w : tensor<2x12xf32>, tensor<12xf32> -> tensor<2x12xf32>
  %q = cleave.slice %y {dim = 1 : i64, start = 0 : i64, end = 4 : i64} : tensor<2x12xf32> -> tensor<2x4xf32>
  %k = cleave.slice %y {dim = 1 : i64, start = 4 : i64, end = 8 : i64} : tensor<2x12xf32> -> tensor<2x4xf32>
  %v = cleave.slice %y {dim = 1 : i64, start = 8 : i64, end = 12 : i64} : tensor<2x12xf32> -> tensor<2x4xf32>
  %qk = cleave.mul %q, %k : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %o = cleave.mul %qk, %v : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %l = cleave.reduce_sum %o {dims = array<i64: 0, 1>} : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @gap(%x: tensor<2x12xf32>) -> tensor<f32> {
  %w = cleave.param "w" : tensor<12xf32>
  %y = cleave.mul %x, %w : tensor<2x12xf32>, tensor<12xf32> -> tensor<2x12xf32>
  %q = cleave.slice %y {dim = 1 : i64, start = 0 : i64, end = 4 : i64} : tensor<2x12xf32> -> tensor<2x4xf32>
  %k = cleave.slice %y {dim = 1 : i64, start = 8 : i64, end = 12 : i64} : tensor<2x12xf32> -> tensor<2x4xf32>
  %o = cleave.mul %q, %k : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %l = cleave.reduce_sum %o {dims = array<i64: 0, 1>} : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
