// RUN: cleave-opt %s -split-input-file -cleave-differentiate -verify-diagnostics | FileCheck %s

// triangular_solve's rule: B's gradient is the solve with the transposed
// triangle, A's is -gB X^T kept on A's triangle (the strict one when
// unitriangular), summed over the batch A was broadcast along.
// CHECK-LABEL: func.func @triangular_solve
// CHECK: %[[X:.*]] = cleave.triangular_solve %[[A:.*]], %[[B:.*]] {unitriangular = true, upper = true} : tensor<3x3xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// CHECK: %[[GB:.*]] = cleave.triangular_solve %[[A]], %{{.*}} {transpose = true, unitriangular = true, upper = true} : tensor<3x3xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// CHECK: cleave.triu %{{.*}} {diagonal = 1 : i64} : tensor<2x3x3xf32>
// CHECK: cleave.reduce_sum %{{.*}} {dims = array<i64: 0>{{.*}}} : tensor<2x3x3xf32>
func.func @triangular_solve() -> tensor<f32> {
  %a = cleave.param "a" : tensor<3x3xf32>
  %b = cleave.param "b" : tensor<2x3x4xf32>
  %x = cleave.triangular_solve %a, %b {upper = true, unitriangular = true}
      : tensor<3x3xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %l = cleave.reduce_sum %x {dims = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// lu_factor's rule (square): solves reading the packed factors, then the
// pivots' permutation as a 0/1 matrix.
// CHECK-LABEL: func.func @lu_factor
// CHECK: %[[LU:[^,]*]], %[[P:[^,]*]], %{{.*}} = cleave.lu_factor
// CHECK: cleave.triangular_solve %[[LU]], %{{.*}} {upper = true}
// CHECK: cleave.triangular_solve %[[LU]], %{{.*}} {transpose = true, unitriangular = true}
// CHECK: cleave.lu_pivots_to_permutation %[[P]] {rows = 3 : i64}
func.func @lu_factor() -> tensor<f32> {
  %a = cleave.param "a" : tensor<3x3xf32>
  %lu, %p, %i = cleave.lu_factor %a : tensor<3x3xf32> -> tensor<3x3xf32>, tensor<3xi32>, tensor<i32>
  %l = cleave.reduce_sum %lu {dims = array<i64: 0, 1>} : tensor<3x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Non-square factors have no rule yet: an error naming the op.
func.func @lu_factor_wide() -> tensor<f32> {
  %a = cleave.param "a" : tensor<3x4xf32>
  // expected-error @+1 {{no gradient rule for cleave.lu_factor of non-square matrices}}
  %lu, %p, %i = cleave.lu_factor %a : tensor<3x4xf32> -> tensor<3x4xf32>, tensor<3xi32>, tensor<i32>
  %l = cleave.reduce_sum %lu {dims = array<i64: 0, 1>} : tensor<3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// cholesky's rule: tril(L^T gL) symmetrized, then solved with L^T on the
// left and L on the right.
// CHECK-LABEL: func.func @cholesky
// CHECK: %[[L:[^,]*]], %{{.*}} = cleave.cholesky %{{.*}} : tensor<3x3xf32> -> tensor<3x3xf32>, tensor<i32>
// CHECK: cleave.tril %{{.*}} {diagonal = -1 : i64} : tensor<3x3xf32>
// CHECK: cleave.triangular_solve %[[L]], %{{.*}} {transpose = true} : tensor<3x3xf32>, tensor<3x3xf32> -> tensor<3x3xf32>
// CHECK: cleave.triangular_solve %[[L]], %{{.*}} {transpose = true} : tensor<3x3xf32>, tensor<3x3xf32> -> tensor<3x3xf32>
func.func @cholesky() -> tensor<f32> {
  %a = cleave.param "a" : tensor<3x3xf32>
  %c, %i = cleave.cholesky %a : tensor<3x3xf32> -> tensor<3x3xf32>, tensor<i32>
  %l = cleave.reduce_sum %c {dims = array<i64: 0, 1>} : tensor<3x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
