// RUN: cleave-opt %s -split-input-file -verify-diagnostics -cleave-global-dropout | FileCheck %s

// Each dropout reads the step's sample offset (created once, a persistent
// i64 scalar the trainer sets per microbatch) and says how many samples its
// input holds: the microbatch, dim 0 of the inputs. [2, 5, 8] holds 2
// samples of 5 rows, [10, 8] the same rows flattened.
// CHECK-LABEL: func.func @block
// CHECK: %[[OFFSET:.*]] = cleave.state "sample_offset" : tensor<i64>
// CHECK: cleave.dropout_train %arg0, %{{.*}}, %[[OFFSET]] {p = 1.000000e-01 : f64, samples = 2 : i64, seed = 0 : i64, stream = 0 : i64} : tensor<2x5x8xf32>, tensor<i64>, tensor<i64>
// CHECK: cleave.dropout_train %{{.*}}, %{{.*}}, %[[OFFSET]] {p = 1.000000e-01 : f64, samples = 2 : i64, seed = 0 : i64, stream = 1 : i64} : tensor<10x8xf32>, tensor<i64>, tensor<i64>
// CHECK-NOT: cleave.state "sample_offset"
func.func @block(%x: tensor<2x5x8xf32> {cleave.name = "x"}) -> tensor<10x8xf32> {
  %step = cleave.state "step" : tensor<i64>
  %a = cleave.dropout_train %x, %step {p = 0.1 : f64, seed = 0 : i64, stream = 0 : i64} : tensor<2x5x8xf32>, tensor<i64>
  %b = cleave.reshape %a : tensor<2x5x8xf32> to tensor<10x8xf32>
  %c = cleave.dropout_train %b, %step {p = 0.1 : f64, seed = 0 : i64, stream = 1 : i64} : tensor<10x8xf32>, tensor<i64>
  return %c : tensor<10x8xf32>
}

// -----

// A dropout whose dim 0 is not the samples' rows (sequence first) cannot
// draw one device's mask for a part of the batch.
func.func @sequence_first(%x: tensor<2x5x8xf32> {cleave.name = "x"}) -> tensor<5x2x8xf32> {
  %step = cleave.state "step" : tensor<i64>
  %t = cleave.permute %x {dims = array<i64: 1, 0, 2>} : tensor<2x5x8xf32> -> tensor<5x2x8xf32>
  // expected-error @+1 {{dropout on 'tensor<5x2x8xf32>': its dim 0 is not the rows of the microbatch's 2 samples}}
  %a = cleave.dropout_train %t, %step {p = 0.1 : f64, seed = 0 : i64, stream = 0 : i64} : tensor<5x2x8xf32>, tensor<i64>
  return %a : tensor<5x2x8xf32>
}
