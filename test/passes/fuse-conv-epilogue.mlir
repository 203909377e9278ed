// RUN: cleave-opt %s -split-input-file -cleave-fuse-conv-epilogue | FileCheck %s

// A residual block's end: conv, add of the block's input, relu. One op,
// where the relu was, with the add's other operand as the residual.
// CHECK-LABEL: func.func @residual_relu(
// CHECK-SAME: %[[X:[^:]+]]: tensor<1x4x6x6xf32>, %[[W:[^:]+]]: tensor<4x4x3x3xf32>, %[[B:[^:]+]]: tensor<4xf32>
// CHECK-NOT: cleave.add
// CHECK-NOT: cleave.relu
// CHECK: %[[Y:.+]] = cleave.fused_conv2d %[[X]], %[[W]] bias %[[B]] residual %[[X]] {dilation = array<i64: 1, 1>, groups = 1 : i64, min = 0.000000e+00 : f64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}
// CHECK-NEXT: return %[[Y]]
func.func @residual_relu(%x: tensor<1x4x6x6xf32>, %w: tensor<4x4x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x6x6xf32> {
  %y = cleave.conv2d %x, %w, %b {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x4x6x6xf32>, tensor<4x4x3x3xf32>, tensor<4xf32> -> tensor<1x4x6x6xf32>
  %s = cleave.add %x, %y : tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32> -> tensor<1x4x6x6xf32>
  %r = cleave.relu %s : tensor<1x4x6x6xf32>
  return %r : tensor<1x4x6x6xf32>
}

// -----

// relu6 as imported: maximum with a splat 0, minimum with a splat 6.
// CHECK-LABEL: func.func @relu6(
// CHECK-NOT: cleave.maximum
// CHECK-NOT: cleave.minimum
// CHECK: cleave.fused_conv2d %{{.+}}, %{{.+}} {dilation = array<i64: 1, 1>, groups = 4 : i64, max = 6.000000e+00 : f64, min = 0.000000e+00 : f64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>}
func.func @relu6(%x: tensor<1x4x6x6xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x3x3xf32> {
  %zero = cleave.constant dense<0.0> : tensor<f32>
  %six = cleave.constant dense<6.0> : tensor<f32>
  %y = cleave.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 4 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x4x6x6xf32>, tensor<4x1x3x3xf32> -> tensor<1x4x3x3xf32>
  %m = cleave.maximum %y, %zero : tensor<1x4x3x3xf32>, tensor<f32> -> tensor<1x4x3x3xf32>
  %n = cleave.minimum %m, %six : tensor<1x4x3x3xf32>, tensor<f32> -> tensor<1x4x3x3xf32>
  return %n : tensor<1x4x3x3xf32>
}

// -----

// A residual without a clamp (MobileNet-v2's linear bottleneck), the
// convolution on the add's right; and a downsampling branch: both operands
// are convolutions, the first one met takes the other as its residual.
// CHECK-LABEL: func.func @residual_only(
// CHECK-SAME: %[[X:[^:]+]]: tensor<1x4x6x6xf32>
// CHECK: %[[D:.+]] = cleave.conv2d %[[X]]
// CHECK: %[[Y:.+]] = cleave.fused_conv2d %[[X]], %{{[^ ]+}} residual %[[D]] {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}
// CHECK-NEXT: return %[[Y]]
func.func @residual_only(%x: tensor<1x4x6x6xf32>, %w: tensor<4x4x1x1xf32>, %v: tensor<4x4x1x1xf32>) -> tensor<1x4x6x6xf32> {
  %y = cleave.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x4x6x6xf32>, tensor<4x4x1x1xf32> -> tensor<1x4x6x6xf32>
  %d = cleave.conv2d %x, %v {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x4x6x6xf32>, tensor<4x4x1x1xf32> -> tensor<1x4x6x6xf32>
  %s = cleave.add %d, %y : tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32> -> tensor<1x4x6x6xf32>
  return %s : tensor<1x4x6x6xf32>
}

// -----

// What stays: a convolution read twice (its relu is not the only user), an
// add that broadcasts, a maximum with 1 (not a relu).
// CHECK-LABEL: func.func @kept(
// CHECK-NOT: cleave.fused_conv2d
// CHECK: cleave.relu
// CHECK: cleave.add
// CHECK: cleave.maximum
// CHECK-NOT: cleave.fused_conv2d
func.func @kept(%x: tensor<1x4x6x6xf32>, %w: tensor<4x4x1x1xf32>, %b: tensor<1x4x1x1xf32>) -> (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) {
  %one = cleave.constant dense<1.0> : tensor<f32>
  %y = cleave.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x4x6x6xf32>, tensor<4x4x1x1xf32> -> tensor<1x4x6x6xf32>
  %r = cleave.relu %y : tensor<1x4x6x6xf32>
  %z = cleave.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x4x6x6xf32>, tensor<4x4x1x1xf32> -> tensor<1x4x6x6xf32>
  %s = cleave.add %z, %b : tensor<1x4x6x6xf32>, tensor<1x4x1x1xf32> -> tensor<1x4x6x6xf32>
  %u = cleave.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x4x6x6xf32>, tensor<4x4x1x1xf32> -> tensor<1x4x6x6xf32>
  %m = cleave.maximum %u, %one : tensor<1x4x6x6xf32>, tensor<f32> -> tensor<1x4x6x6xf32>
  return %y, %r, %s, %m : tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>
}

// -----

// A relu fuses; a minimum after it is not a relu6 as imported (that is a
// maximum then a minimum) and stays a kernel of its own.
// CHECK-LABEL: func.func @relu_then_minimum(
// CHECK: %[[Y:.+]] = cleave.fused_conv2d {{.*}}min = 0.000000e+00 : f64
// CHECK-NOT: max =
// CHECK-NEXT: cleave.minimum %[[Y]]
func.func @relu_then_minimum(%x: tensor<1x4x6x6xf32>, %w: tensor<4x4x1x1xf32>) -> tensor<1x4x6x6xf32> {
  %six = cleave.constant dense<6.0> : tensor<f32>
  %v = cleave.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x4x6x6xf32>, tensor<4x4x1x1xf32> -> tensor<1x4x6x6xf32>
  %vr = cleave.relu %v : tensor<1x4x6x6xf32>
  %vm = cleave.minimum %vr, %six : tensor<1x4x6x6xf32>, tensor<f32> -> tensor<1x4x6x6xf32>
  return %vm : tensor<1x4x6x6xf32>
}
