// RUN: cleave-opt %s | cleave-opt | FileCheck %s
// RUN: cleave-opt %s --mlir-print-op-generic | cleave-opt | FileCheck %s

// gather and scatter round-trip; scatter's reduce prints only when it is not
// the default overwrite, include_self only when false.
// CHECK-LABEL: func.func @indexing
// CHECK: cleave.gather %arg0, %arg1 {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x3xi64> -> tensor<4x3xf32>
// CHECK: cleave.scatter %arg0, %arg1, %arg2 {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x3xi64>, tensor<4x3xf32> -> tensor<4x8xf32>
// CHECK: cleave.scatter %arg0, %arg1, %arg2 {dim = 1 : i64, include_self = false, reduce = #cleave<scatter_reduce amax>}
// CHECK: cleave.scatter %arg3, %arg4, %arg5 {dim = 0 : i64, reduce = #cleave<scatter_reduce sum>} : tensor<5xi1>, tensor<2xi32>, tensor<2xi1> -> tensor<5xi1>
// CHECK: cleave.gather %arg6, %arg7 {dim = 0 : i64} : tensor<i64>, tensor<i64> -> tensor<i64>
func.func @indexing(%x: tensor<4x8xf32>, %i: tensor<4x3xi64>, %s: tensor<4x3xf32>, %b: tensor<5xi1>,
                    %j: tensor<2xi32>, %bs: tensor<2xi1>, %z: tensor<i64>, %zi: tensor<i64>)
    -> (tensor<4x3xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<5xi1>, tensor<i64>) {
  %0 = cleave.gather %x, %i {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x3xi64> -> tensor<4x3xf32>
  %1 = cleave.scatter %x, %i, %s {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x3xi64>, tensor<4x3xf32> -> tensor<4x8xf32>
  %2 = cleave.scatter %x, %i, %s {dim = 1 : i64, reduce = #cleave<scatter_reduce amax>, include_self = false} : tensor<4x8xf32>, tensor<4x3xi64>, tensor<4x3xf32> -> tensor<4x8xf32>
  %3 = cleave.scatter %b, %j, %bs {dim = 0 : i64, reduce = #cleave<scatter_reduce sum>} : tensor<5xi1>, tensor<2xi32>, tensor<2xi1> -> tensor<5xi1>
  %4 = cleave.gather %z, %zi {dim = 0 : i64} : tensor<i64>, tensor<i64> -> tensor<i64>
  return %0, %1, %2, %3, %4 : tensor<4x3xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<5xi1>, tensor<i64>
}

// The indexing composites round-trip too (-cleave-decompose removes them).
// CHECK-LABEL: func.func @composites
// CHECK: cleave.index_select %arg0, %arg1 {dim = 1 : i64} : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<4x3xf32>
// CHECK: cleave.index %arg2[%arg1, %arg1] {dims = array<i64: 0, 2>} : (tensor<4x5x6xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x5xf32>
// CHECK: cleave.index_put %arg2[%arg1], %arg3 {accumulate = false, dims = array<i64: 1>}
// CHECK: cleave.flip %arg0 {dims = array<i64: 0, 1>} : tensor<4x8xf32>
func.func @composites(%x: tensor<4x8xf32>, %i: tensor<3xi64>, %y: tensor<4x5x6xf32>, %v: tensor<f32>)
    -> (tensor<4x3xf32>, tensor<3x5xf32>, tensor<4x5x6xf32>, tensor<4x8xf32>) {
  %0 = cleave.index_select %x, %i {dim = 1 : i64} : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  %1 = cleave.index %y[%i, %i] {dims = array<i64: 0, 2>} : (tensor<4x5x6xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x5xf32>
  %2 = cleave.index_put %y[%i], %v {dims = array<i64: 1>, accumulate = false} : (tensor<4x5x6xf32>, tensor<3xi64>, tensor<f32>) -> tensor<4x5x6xf32>
  %3 = cleave.flip %x {dims = array<i64: 0, 1>} : tensor<4x8xf32>
  return %0, %1, %2, %3 : tensor<4x3xf32>, tensor<3x5xf32>, tensor<4x5x6xf32>, tensor<4x8xf32>
}
