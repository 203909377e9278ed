// RUN: cleave-opt %s | cleave-opt | FileCheck %s
// RUN: cleave-opt %s --mlir-print-op-generic | cleave-opt | FileCheck %s

// The linear algebra ops round-trip: lu_factor's three results (pivots and
// info i32, as PyTorch), the permutation of wide factors' pivots, cholesky
// lower and upper, and a triangular solve whose batches broadcast.
// CHECK-LABEL: func.func @linalg
// CHECK: cleave.lu_factor %arg0 : tensor<2x3x5xf32> -> tensor<2x3x5xf32>, tensor<2x3xi32>, tensor<2xi32>
// CHECK: cleave.lu_pivots_to_permutation %{{.*}} {rows = 3 : i64} : tensor<2x3xi32> -> tensor<2x3xi64>
// CHECK: cleave.cholesky %arg1 : tensor<4x4xf32> -> tensor<4x4xf32>, tensor<i32>
// CHECK: cleave.cholesky %arg1 {upper = true} : tensor<4x4xf32> -> tensor<4x4xf32>, tensor<i32>
// CHECK: cleave.triangular_solve %arg2, %arg3 {transpose = true, unitriangular = true, upper = true} : tensor<2x1x3x3xf32>, tensor<4x3x2xf32> -> tensor<2x4x3x2xf32>
func.func @linalg(%a: tensor<2x3x5xf32>, %s: tensor<4x4xf32>, %t: tensor<2x1x3x3xf32>,
                  %b: tensor<4x3x2xf32>)
    -> (tensor<2x3x5xf32>, tensor<2x3xi64>, tensor<2xi32>, tensor<4x4xf32>, tensor<i32>,
        tensor<4x4xf32>, tensor<2x4x3x2xf32>) {
  %lu, %piv, %info = cleave.lu_factor %a : tensor<2x3x5xf32> -> tensor<2x3x5xf32>, tensor<2x3xi32>, tensor<2xi32>
  %perm = cleave.lu_pivots_to_permutation %piv {rows = 3 : i64} : tensor<2x3xi32> -> tensor<2x3xi64>
  %l, %linfo = cleave.cholesky %s : tensor<4x4xf32> -> tensor<4x4xf32>, tensor<i32>
  %u, %uinfo = cleave.cholesky %s {upper = true} : tensor<4x4xf32> -> tensor<4x4xf32>, tensor<i32>
  %x = cleave.triangular_solve %t, %b {upper = true, transpose = true, unitriangular = true}
      : tensor<2x1x3x3xf32>, tensor<4x3x2xf32> -> tensor<2x4x3x2xf32>
  return %lu, %perm, %info, %l, %linfo, %u, %x : tensor<2x3x5xf32>, tensor<2x3xi64>, tensor<2xi32>,
      tensor<4x4xf32>, tensor<i32>, tensor<4x4xf32>, tensor<2x4x3x2xf32>
}
