// RUN: not cleave-opt %s -cleave-reduce-gradients="ranks=2" 2>&1 | FileCheck %s

// A function that returns no gradients (not differentiated yet).
// CHECK: error: no gradients to reduce: run -cleave-differentiate first
func.func @forward(%x: tensor<2x3xf32>) -> tensor<f32> {
  %l = cleave.reduce_sum %x {dims = array<i64: 0, 1>} : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
