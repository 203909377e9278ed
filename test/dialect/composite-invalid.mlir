// RUN: cleave-opt %s -split-input-file -verify-diagnostics

func.func @prelu_weight(%x: tensor<2x4x3xf32>, %w: tensor<3xf32>) -> tensor<2x4x3xf32> {
  // expected-error @+1 {{weight of 3 elements is neither one nor one per channel (dim 1) of the input}}
  %0 = cleave.prelu %x, %w : tensor<2x4x3xf32>, tensor<3xf32>
  return %0 : tensor<2x4x3xf32>
}

// -----

func.func @median_empty(%x: tensor<2x0xf32>) {
  // expected-error @+1 {{'cleave.median' op cannot take an extremum over the empty dim 1 of 'tensor<2x0xf32>'}}
  %0:2 = cleave.median %x {dim = 1 : i64} : tensor<2x0xf32> -> tensor<2xf32>, tensor<2xi64>
  return
}

// -----

func.func @quantile_interpolation(%x: tensor<2x5xf32>, %q: tensor<f32>) {
  // expected-error @+1 {{interpolation must be linear, lower, higher, nearest or midpoint, got 'cubic'}}
  %0 = cleave.quantile %x, %q {dim = 1 : i64, interpolation = "cubic"} : tensor<2x5xf32>, tensor<f32> -> tensor<2xf32>
  return
}

// -----

func.func @quantile_q_rank(%x: tensor<2x5xf32>, %q: tensor<2x2xf32>) {
  // expected-error @+1 {{q must be a 0-d or 1-D tensor of the input's element type}}
  %0 = cleave.quantile %x, %q {dim = 1 : i64} : tensor<2x5xf32>, tensor<2x2xf32> -> tensor<2x2x2xf32>
  return
}

// -----

func.func @glu_odd(%x: tensor<2x5xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{halves dim 1 of odd size 5}}
  %0 = cleave.glu %x {dim = 1 : i64} : tensor<2x5xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @var_dim(%x: tensor<2x5xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{reduction dim 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.var %x {dims = array<i64: 2>, correction = 1.0 : f64} : tensor<2x5xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @pad_reflect_too_far(%x: tensor<2x3xf32>) -> tensor<2x9xf32> {
  // expected-error @+1 {{reflect padding of dim 1 by 3, 3 needs them below its size 3}}
  %0 = cleave.pad %x {pads = array<i64: 3, 3>, mode = "reflect", value = 0.0 : f64} : tensor<2x3xf32> -> tensor<2x9xf32>
  return %0 : tensor<2x9xf32>
}

// -----

func.func @group_norm_groups(%x: tensor<2x6x4xf32>) -> tensor<2x6x4xf32> {
  // expected-error @+1 {{6 channels do not fall into 4 groups}}
  %0 = cleave.group_norm %x {num_groups = 4 : i64, eps = 1.0e-5 : f64} : (tensor<2x6x4xf32>) -> tensor<2x6x4xf32>
  return %0 : tensor<2x6x4xf32>
}

// -----

func.func @interpolate_mode(%x: tensor<1x1x4xf32>) -> tensor<1x1x8xf32> {
  // expected-error @+1 {{mode 'area' is not nearest, nearest_exact, linear or cubic}}
  %0 = cleave.interpolate %x {mode = "area", align_corners = false, scales = array<f64: 0.0>} : tensor<1x1x4xf32> -> tensor<1x1x8xf32>
  return %0 : tensor<1x1x8xf32>
}

// -----

func.func @loss_reduction(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{reduction 'batchmean' is not none, mean or sum}}
  %0 = cleave.l1_loss %x, %y {reduction = "batchmean"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @conv3d_rank(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3x3xf32>) {
  // expected-error @+2 {{conv3d needs a 5-D input [N, C, D, H, W] and a 5-D weight [F, C/groups, KD, KH, KW], got 'tensor<2x3x8x8xf32>' and 'tensor<4x3x3x3x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.conv3d %x, %w {stride = array<i64: 1, 1, 1>, padding = array<i64: 0, 0, 0>, dilation = array<i64: 1, 1, 1>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3x3xf32> -> tensor<2x4x6x6x6xf32>
  return
}

// -----

func.func @conv3d_stride(%x: tensor<2x3x8x8x8xf32>, %w: tensor<4x3x3x3x3xf32>) {
  // expected-error @+2 {{stride must have 3 entries (depth, height, width), got 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.conv3d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0, 0>, dilation = array<i64: 1, 1, 1>, groups = 1 : i64} : tensor<2x3x8x8x8xf32>, tensor<4x3x3x3x3xf32> -> tensor<2x4x6x6x6xf32>
  return
}
