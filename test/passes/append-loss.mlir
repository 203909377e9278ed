// RUN: cleave-opt %s -split-input-file -cleave-append-loss=loss=cross_entropy -verify-diagnostics | FileCheck %s --check-prefix=CE
// RUN: cleave-opt %s -split-input-file -cleave-append-loss=loss=mse -verify-diagnostics | FileCheck %s --check-prefix=MSE
// RUN: not cleave-opt %s -split-input-file -cleave-append-loss=loss=model 2>&1 | FileCheck %s --check-prefix=MODEL
// RUN: not cleave-opt %s -cleave-append-loss=loss=hinge 2>&1 | FileCheck %s --check-prefix=BAD

// Logits [B, T, C]: cross_entropy flattens them to [B*T, C] and the labels to
// [B*T]; mse compares them with labels of the output's type.
// CE-LABEL: func.func @logits
// CE-SAME: %arg1: tensor<2x3xi64> {cleave.name = "labels"}) -> (tensor<f32> {cleave.name = "loss"})
// CE: %[[FLAT:.*]] = cleave.reshape %{{.*}} : tensor<2x3x5xf32> to tensor<6x5xf32>
// CE: %[[LOGP:.*]] = cleave.log_softmax %[[FLAT]] {dim = 1 : i64} : tensor<6x5xf32>
// CE: %[[LABELS:.*]] = cleave.reshape %arg1 : tensor<2x3xi64> to tensor<6xi64>
// CE: %[[LOSS:.*]] = cleave.nll_loss %[[LOGP]], %[[LABELS]] : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
// CE: return %[[LOSS]]
// MSE-LABEL: func.func @logits
// MSE-SAME: %arg1: tensor<2x3x5xf32> {cleave.name = "labels"}) -> (tensor<f32> {cleave.name = "loss"})
// MSE: %[[D:.*]] = cleave.sub %[[OUT:.*]], %arg1
// MSE: %[[SQ:.*]] = cleave.mul %[[D]], %[[D]]
// MSE: cleave.reduce_mean %[[SQ]] {dims = array<i64: 0, 1, 2>} : tensor<2x3x5xf32> -> tensor<f32>
// MODEL: error: --loss model needs forward to return the loss, one scalar; it returns tensor<2x3x5xf32>: use --loss cross_entropy or --loss mse
func.func @logits(%x: tensor<2x3x5xf32> {cleave.name = "x"}) -> (tensor<2x3x5xf32> {cleave.name = "output_0"}) {
  %y = cleave.relu %x : tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// A model with its own loss is trained as it is with --loss model; the
// other losses need predictions, and a model input named labels clashes.
// MODEL-NOT: error
func.func @own_loss(%x: tensor<4xf32> {cleave.name = "x"}, %l: tensor<4xf32> {cleave.name = "labels"}) -> tensor<f32> {
  // expected-error @-1 {{the model already has an input named 'labels'}}
  %d = cleave.sub %x, %l : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %s = cleave.reduce_sum %d {dims = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// MODEL: error: training needs forward to return one tensor (a scalar loss, or the predictions a --loss is computed from); it returns 2
func.func @two_outputs(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @-1 {{training needs forward to return one tensor}}
  return %x, %x : tensor<4xf32>, tensor<4xf32>
}

// BAD: error: cleave-append-loss: loss must be model, cross_entropy or mse, got 'hinge'
