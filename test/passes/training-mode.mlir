// RUN: cleave-opt %s -split-input-file -cleave-training-mode=seed=7 -verify-diagnostics | FileCheck %s

// Dropouts get masks keyed by the seed, the step counter (created once) and
// a stream per dropout in program order.
// CHECK-LABEL: func.func @dropouts
// CHECK: %[[STEP:.*]] = cleave.state "step" : tensor<i64>
// CHECK: %[[A:.*]] = cleave.dropout_train %arg0, %[[STEP]] {p = 1.000000e-01 : f64, seed = 7 : i64, stream = 0 : i64}
// CHECK-NOT: cleave.dropout
// CHECK: %[[B:.*]] = cleave.relu %[[A]]
// CHECK: cleave.dropout_train %[[B]], %[[STEP]] {p = 5.000000e-01 : f64, seed = 7 : i64, stream = 1 : i64}
func.func @dropouts(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = cleave.dropout %x {p = 0.1 : f64} : tensor<4x8xf32>
  %b = cleave.relu %a : tensor<4x8xf32>
  %c = cleave.dropout %b {p = 0.5 : f64} : tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// -----

// batch_norm normalizes with batch statistics and updates its running
// statistics in place: momentum from the traced call, count = N * H * W.
// CHECK-LABEL: func.func @batch_norm
// CHECK: %[[RM:.*]] = cleave.param "bn.running_mean" {buffer}
// CHECK: %[[RV:.*]] = cleave.param "bn.running_var" {buffer}
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[VAR:.*]] = cleave.batch_norm_train %arg0 weight %{{.*}} bias %{{.*}} {eps = 1.000000e-05 : f64}
// CHECK-NEXT: cleave.update_running_stats %[[RM]], %[[RV]], %[[MEAN]], %[[VAR]] {count = 50 : i64, momentum = 3.000000e-01 : f64}
// CHECK: cleave.relu %[[Y]]
// CHECK-NOT: cleave.state
func.func @batch_norm(%x: tensor<2x3x5x5xf32>) -> tensor<2x3x5x5xf32> {
  %rm = cleave.param "bn.running_mean" {buffer} : tensor<3xf32>
  %rv = cleave.param "bn.running_var" {buffer} : tensor<3xf32>
  %w = cleave.param "bn.weight" : tensor<3xf32>
  %b = cleave.param "bn.bias" : tensor<3xf32>
  %y = cleave.batch_norm %x, %rm, %rv weight %w bias %b {eps = 1.0e-05 : f64, momentum = 0.3 : f64}
      : (tensor<2x3x5x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x5x5xf32>
  %r = cleave.relu %y : tensor<2x3x5x5xf32>
  return %r : tensor<2x3x5x5xf32>
}

// -----

// Running statistics that are not buffers cannot be updated.
func.func @computed_stats(%x: tensor<2x3x5x5xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<2x3x5x5xf32> {
  // expected-error @+1 {{batch_norm's running mean is not a buffer of the model}}
  %y = cleave.batch_norm %x, %m, %v {eps = 1.0e-05 : f64}
      : (tensor<2x3x5x5xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x5x5xf32>
  return %y : tensor<2x3x5x5xf32>
}

// -----

// One value per channel has no batch variance, as PyTorch says too.
func.func @one_value(%x: tensor<1x3x1x1xf32>) -> tensor<1x3x1x1xf32> {
  %rm = cleave.param "bn.running_mean" {buffer} : tensor<3xf32>
  %rv = cleave.param "bn.running_var" {buffer} : tensor<3xf32>
  // expected-error @+1 {{needs more than one value per channel}}
  %y = cleave.batch_norm %x, %rm, %rv {eps = 1.0e-05 : f64}
      : (tensor<1x3x1x1xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x1x1xf32>
  return %y : tensor<1x3x1x1xf32>
}
