// RUN: cleave-opt %s -split-input-file -verify-diagnostics

func.func @gather_rank(%x: tensor<4x8xf32>, %i: tensor<3xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{index 'tensor<3xi64>' must have the input's rank 2}}
  %0 = cleave.gather %x, %i {dim = 1 : i64} : tensor<4x8xf32>, tensor<3xi64> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @gather_larger(%x: tensor<4x8xf32>, %i: tensor<5x2xi64>) -> tensor<5x2xf32> {
  // expected-error @+1 {{is larger than the input 'tensor<4x8xf32>' in dim 0}}
  %0 = cleave.gather %x, %i {dim = 1 : i64} : tensor<4x8xf32>, tensor<5x2xi64> -> tensor<5x2xf32>
  return %0 : tensor<5x2xf32>
}

// -----

func.func @gather_dim(%x: tensor<4x8xf32>, %i: tensor<4x2xi64>) -> tensor<4x2xf32> {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = cleave.gather %x, %i {dim = 2 : i64} : tensor<4x8xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @gather_float_index(%x: tensor<4x8xf32>, %i: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{operand #1 must be}}
  %0 = cleave.gather %x, %i {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @scatter_src(%x: tensor<4x8xf32>, %i: tensor<4x2xi64>, %s: tensor<4x3xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{src 'tensor<4x3xf32>' must have the index's shape}}
  %0 = cleave.scatter %x, %i, %s {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x2xi64>, tensor<4x3xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @scatter_mean_bool(%x: tensor<4xi1>, %i: tensor<2xi64>, %s: tensor<2xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{mean of i1 elements is not defined}}
  %0 = cleave.scatter %x, %i, %s {dim = 0 : i64, reduce = #cleave<scatter_reduce mean>} : tensor<4xi1>, tensor<2xi64>, tensor<2xi1> -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @index_dims(%x: tensor<4x5xf32>, %i: tensor<3xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{dims must be increasing dims of the input}}
  %0 = cleave.index %x[%i, %i] {dims = array<i64: 1, 0>} : (tensor<4x5xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @index_broadcast(%x: tensor<4x5xf32>, %i: tensor<3xi64>, %j: tensor<2xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{the index tensors do not broadcast together}}
  %0 = cleave.index %x[%i, %j] {dims = array<i64: 0, 1>} : (tensor<4x5xf32>, tensor<3xi64>, tensor<2xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @index_put_values(%x: tensor<4x5xf32>, %i: tensor<3xi64>, %v: tensor<2x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{do not broadcast to the selection [3, 5]}}
  %0 = cleave.index_put %x[%i], %v {dims = array<i64: 0>, accumulate = false} : (tensor<4x5xf32>, tensor<3xi64>, tensor<2x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @flip_twice(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{dim 1 appears twice}}
  %0 = cleave.flip %x {dims = array<i64: 1, 1>} : tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @roll_shifts(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{has 2 shifts for 1 dims}}
  %0 = cleave.roll %x {shifts = array<i64: 1, 2>, dims = array<i64: 1>} : tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}
