// RUN: cleave-opt %s -split-input-file -verify-diagnostics

func.func @lu_vector(%a: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{input 'tensor<3xf32>' must be a matrix or a batch of matrices (rank >= 2)}}
  %lu, %p, %i = cleave.lu_factor %a : tensor<3xf32> -> tensor<3xf32>, tensor<1xi32>, tensor<i32>
  return %lu : tensor<3xf32>
}

// -----

func.func @lu_pivots(%a: tensor<3x5xf32>) -> tensor<5xi32> {
  // expected-error @+1 {{pivots 'tensor<5xi32>' must be 'tensor<3xi32>'}}
  %lu, %p, %i = cleave.lu_factor %a : tensor<3x5xf32> -> tensor<3x5xf32>, tensor<5xi32>, tensor<i32>
  return %p : tensor<5xi32>
}

// -----

func.func @lu_pivots_i64(%a: tensor<3x3xf32>) -> tensor<3xi64> {
  // expected-error @+1 {{result #1 must be statically shaped tensor of 32-bit signless integer values}}
  %lu, %p, %i = cleave.lu_factor %a : tensor<3x3xf32> -> tensor<3x3xf32>, tensor<3xi64>, tensor<i32>
  return %p : tensor<3xi64>
}

// -----

func.func @permutation_rows(%p: tensor<4xi32>) -> tensor<3xi64> {
  // expected-error @+1 {{rows 3 must be at least the 4 pivots}}
  %0 = cleave.lu_pivots_to_permutation %p {rows = 3 : i64} : tensor<4xi32> -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

func.func @cholesky_square(%a: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{input 'tensor<3x4xf32>' must hold square matrices}}
  %l, %i = cleave.cholesky %a : tensor<3x4xf32> -> tensor<3x4xf32>, tensor<i32>
  return %l : tensor<3x4xf32>
}

// -----

func.func @cholesky_info(%a: tensor<2x3x3xf32>) -> tensor<i32> {
  // expected-error @+1 {{info 'tensor<i32>' must be 'tensor<2xi32>'}}
  %l, %i = cleave.cholesky %a : tensor<2x3x3xf32> -> tensor<2x3x3xf32>, tensor<i32>
  return %i : tensor<i32>
}

// -----

func.func @solve_rows(%a: tensor<3x3xf32>, %b: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{b 'tensor<4x2xf32>' must have 3 rows, as a's matrices}}
  %0 = cleave.triangular_solve %a, %b : tensor<3x3xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @solve_batch(%a: tensor<2x3x3xf32>, %b: tensor<4x3x2xf32>) -> tensor<4x3x2xf32> {
  // expected-error @+1 {{batch dims of a 'tensor<2x3x3xf32>' and b 'tensor<4x3x2xf32>' do not broadcast}}
  %0 = cleave.triangular_solve %a, %b : tensor<2x3x3xf32>, tensor<4x3x2xf32> -> tensor<4x3x2xf32>
  return %0 : tensor<4x3x2xf32>
}

// -----

func.func @solve_result(%a: tensor<2x3x3xf32>, %b: tensor<3x2xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{result 'tensor<3x2xf32>' must be 'tensor<2x3x2xf32>'}}
  %0 = cleave.triangular_solve %a, %b : tensor<2x3x3xf32>, tensor<3x2xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}
