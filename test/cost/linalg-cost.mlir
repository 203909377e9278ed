// RUN: cleave-opt %s -mlir-disable-threading -cleave-test-op-cost -o /dev/null | FileCheck %s

// The linear algebra ops' costs, worked out by hand for two 3x3 matrices.

// CHECK-LABEL: cost of @linalg
func.func @linalg(%a: tensor<2x3x3xf32>, %b: tensor<3x4xf32>)
    -> (tensor<2x3x3xf32>, tensor<2x3xi64>, tensor<2x3x3xf32>, tensor<2x3x4xf32>) {
  // getrf: 2(mnk - (m+n)k^2/2 + k^3/3) = 2(27 - 27 + 9) = 18 per matrix. Reads
  // 72 B; writes the factors (72), pivots (24) and info (8). Backward 5mnk per
  // matrix (270) from the saved factors and pivots (96 B).
  // CHECK-NEXT: cleave.lu_factor reduction fwd: flops=36 read=72 written=104 kernels=1 bwd: flops=270 read=144 written=72 kernels=8 saved=96
  %lu, %p, %i = cleave.lu_factor %a : tensor<2x3x3xf32> -> tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>
  // One step per permutation entry; integers, no backward.
  // CHECK-NEXT: cleave.lu_pivots_to_permutation reduction fwd: flops=6 read=24 written=48 kernels=1 bwd: flops=0 read=0 written=0 kernels=0 saved=0
  %perm = cleave.lu_pivots_to_permutation %p {rows = 3 : i64} : tensor<2x3xi32> -> tensor<2x3xi64>
  // potrf: n^3/3 = 9 per matrix; the backward 9x that, from the saved factor.
  // CHECK-NEXT: cleave.cholesky reduction fwd: flops=18 read=72 written=80 kernels=1 bwd: flops=162 read=144 written=72 kernels=6 saved=72
  %l, %li = cleave.cholesky %a : tensor<2x3x3xf32> -> tensor<2x3x3xf32>, tensor<2xi32>
  // trsm: n = 3 per result element (24); b broadcasts over a's batch. The
  // backward (3x) reads the gradient and the saved a and result.
  // CHECK-NEXT: cleave.triangular_solve reduction fwd: flops=72 read=120 written=96 kernels=1 bwd: flops=216 read=264 written=120 kernels=1 saved=168
  %x = cleave.triangular_solve %a, %b : tensor<2x3x3xf32>, tensor<3x4xf32> -> tensor<2x3x4xf32>
  return %lu, %perm, %l, %x : tensor<2x3x3xf32>, tensor<2x3xi64>, tensor<2x3x3xf32>, tensor<2x3x4xf32>
}
