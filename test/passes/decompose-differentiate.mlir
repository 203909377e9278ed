// RUN: cleave-opt %s -cleave-decompose -cleave-append-loss -cleave-differentiate | FileCheck %s

// Decomposition runs before differentiation: the backward pass is built
// from the core ops' gradient rules (sqrt, div, reduce_sum, mul, sub,
// reduce_mean); no composite needs one.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: cleave.std
// CHECK-NOT: cleave.var
// CHECK: cleave.sqrt
// The gradient of the two-pass variance flows back through the centering.
// CHECK: cleave.broadcast_to
// CHECK-NOT: cleave.std
func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
  %w = cleave.param "w" : tensor<2x4xf32>
  %y = cleave.mul %x, %w : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %0 = cleave.std %y {dims = array<i64: 0, 1>, correction = 1.0 : f64} : tensor<2x4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}
