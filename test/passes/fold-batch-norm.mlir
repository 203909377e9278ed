// RUN: cleave-opt %s -split-input-file -cleave-fold-batch-norm | FileCheck %s

// Two output channels, one input channel, a 1x1 filter [2, 3] with bias
// [1, -1]; the batch norm has mean [1, 2], var [3, 0] (eps 1), gamma
// [2, 4], beta [0.5, 0]. Per channel s = gamma / sqrt(var + eps) = [1, 4]:
// the filter becomes [2, 12], the bias (c - mean) * s + beta = [0.5, -12].
// The old filter, bias and the statistics are erased.
// CHECK-LABEL: func.func @folds(
// CHECK-SAME: %[[X:[^:]+]]: tensor<1x1x2x2xf32>
// CHECK-NOT: cleave.batch_norm
// CHECK-DAG: %[[W:.+]] = cleave.constant dense<{{\[}}{{\[}}{{\[}}[2.000000e+00]]], {{\[}}{{\[}}[1.200000e+01]]]]> : tensor<2x1x1x1xf32>
// CHECK-DAG: %[[B:.+]] = cleave.constant dense<[5.000000e-01, -1.200000e+01]> : tensor<2xf32>
// CHECK: %[[Y:.+]] = cleave.conv2d %[[X]], %[[W]], %[[B]] {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: cleave.constant
func.func @folds(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = cleave.constant dense<[[[[2.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>
  %c = cleave.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %y = cleave.conv2d %x, %w, %c {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>, tensor<2xf32> -> tensor<1x2x2x2xf32>
  %mean = cleave.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %var = cleave.constant dense<[3.0, 0.0]> : tensor<2xf32>
  %gamma = cleave.constant dense<[2.0, 4.0]> : tensor<2xf32>
  %beta = cleave.constant dense<[0.5, 0.0]> : tensor<2xf32>
  %z = cleave.batch_norm %y, %mean, %var weight %gamma bias %beta {eps = 1.0 : f64} : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  return %z : tensor<1x2x2x2xf32>
}

// -----

// No conv bias and no affine weights (BatchNorm2d(affine=False)): s =
// 1 / sqrt(var + eps) = [0.5, 2], the bias is -mean * s. A depthwise filter
// scales the same way, per output channel.
// CHECK-LABEL: func.func @no_bias_no_affine(
// CHECK-NOT: cleave.batch_norm
// CHECK-DAG: cleave.constant dense<{{\[}}{{\[}}{{\[}}[2.000000e+00, 4.000000e+00]]], {{\[}}{{\[}}[2.000000e+00, 4.000000e+00]]]]> : tensor<2x1x1x2xf32>
// CHECK-DAG: cleave.constant dense<[-5.000000e-01, 4.000000e+00]> : tensor<2xf32>
// CHECK: cleave.conv2d {{.*}}groups = 2 : i64
func.func @no_bias_no_affine(%x: tensor<1x2x3x3xf32>) -> tensor<1x2x3x2xf32> {
  %w = cleave.constant dense<[[[[4.0, 8.0]]], [[[1.0, 2.0]]]]> : tensor<2x1x1x2xf32>
  %y = cleave.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x2x3x3xf32>, tensor<2x1x1x2xf32> -> tensor<1x2x3x2xf32>
  %mean = cleave.constant dense<[1.0, -2.0]> : tensor<2xf32>
  %var = cleave.constant dense<[3.75, 0.0]> : tensor<2xf32>
  %z = cleave.batch_norm %y, %mean, %var {eps = 0.25 : f64} : (tensor<1x2x3x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x3x2xf32>
  return %z : tensor<1x2x3x2xf32>
}

// -----

// Left alone: the convolution's result has another user; the batch norm
// follows a relu; the statistics are params, whose data cleave-opt does not
// have.
// CHECK-LABEL: func.func @left_alone(
// CHECK-COUNT-3: cleave.batch_norm
func.func @left_alone(%x: tensor<1x1x2x2xf32>) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) {
  %w = cleave.constant dense<2.0> : tensor<1x1x1x1xf32>
  %s = cleave.constant dense<1.0> : tensor<1xf32>
  %y = cleave.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32> -> tensor<1x1x2x2xf32>
  %shared = cleave.batch_norm %y, %s, %s {eps = 1.0e-05 : f64} : (tensor<1x1x2x2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x2x2xf32>
  %r = cleave.relu %x : tensor<1x1x2x2xf32>
  %after_relu = cleave.batch_norm %r, %s, %s {eps = 1.0e-05 : f64} : (tensor<1x1x2x2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x2x2xf32>
  %y2 = cleave.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32> -> tensor<1x1x2x2xf32>
  %mean = cleave.param "bn.running_mean" {buffer} : tensor<1xf32>
  %var = cleave.param "bn.running_var" {buffer} : tensor<1xf32>
  %unknown = cleave.batch_norm %y2, %mean, %var {eps = 1.0e-05 : f64} : (tensor<1x1x2x2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x2x2xf32>
  return %shared, %y, %after_relu, %unknown : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
}
