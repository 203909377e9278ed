// RUN: cleave-opt %s -split-input-file -verify-diagnostics

// The special-function ops' verifiers and type constraints.

func.func @polygamma_negative_order(%x: tensor<4xf32>) {
  // expected-error @+1 {{'cleave.polygamma' op order n must be non-negative, got -1}}
  %0 = cleave.polygamma %x {n = -1 : i64} : tensor<4xf32>
  return
}

// -----

func.func @unknown_polynomial(%x: tensor<4xf32>, %n: tensor<f32>) {
  // expected-error @+1 {{'cleave.orthogonal_polynomial' op unknown polynomial family 'jacobi_p'}}
  %0 = cleave.orthogonal_polynomial %x, %n {family = "jacobi_p"} : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return
}

// -----

// Integers are promoted by the importer; the ops take floats only.
func.func @lgamma_of_integers(%x: tensor<4xi64>) {
  // expected-error @+1 {{'cleave.lgamma' op operand #0 must be}}
  %0 = cleave.lgamma %x : tensor<4xi64>
  return
}
