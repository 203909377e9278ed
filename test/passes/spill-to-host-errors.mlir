// RUN: cleave-opt %s -split-input-file -cleave-spill-to-host="parameters=l9.weight" -verify-diagnostics

// A named parameter that does not exist is an error.
// expected-error @+1 {{no parameter 'l9.weight' to spill}}
func.func @missing(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = cleave.param "l1.weight" : tensor<4x4xf32>
  %y = cleave.linear %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("l1")
  return %y : tensor<2x4xf32>
}

// -----

// Buffers (running statistics) are not trained and stay on the device.
func.func @buffer(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{buffer 'l9.weight' cannot be spilled: only parameters move to the host}}
  %b = cleave.param "l9.weight" {buffer} : tensor<4xf32>
  %y = cleave.add %x, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32> loc("l9")
  return %y : tensor<4xf32>
}

// -----

// A returned parameter would have to be on the device.
func.func @returned(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = cleave.param "l9.weight" : tensor<4xf32>
  // expected-error @+1 {{returns parameter 'l9.weight', which is spilled}}
  return %w : tensor<4xf32>
}

// -----

// A prefetch reads a host tensor; a spill writes one from a device buffer.
func.func @not_host(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = cleave.param "w" : tensor<4xf32>
  // expected-error @+1 {{source must be a cleave.param or cleave.state with cleave.pool = "host"}}
  %y = cleave.prefetch %w : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @spill_persistent(%x: tensor<4xf32>) -> tensor<4xf32> {
  %h = cleave.state "h" {cleave.pool = "host"} : tensor<4xf32>
  %w = cleave.param "w" : tensor<4xf32>
  // expected-error @+1 {{value must be a device buffer, not a persistent tensor}}
  cleave.spill %h, %w : tensor<4xf32>
  return %x : tensor<4xf32>
}
