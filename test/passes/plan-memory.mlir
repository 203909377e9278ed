// RUN: cleave-opt %s -split-input-file -cleave-plan-memory | FileCheck %s

// A chain: each result dies at its only use, so two 512-byte slots alternate
// after the input's, which stays intact to the end.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: %arg0: tensor<4x32xf32> {cleave.arena_offset = 0 : i64
// CHECK-SAME: attributes {cleave.arena_bytes = 1536 : i64, cleave.peak_live_bytes = 1536 : i64}
// CHECK: cleave.relu %arg0 {cleave.arena_offset = 512 : i64}
// CHECK: cleave.exp %{{.*}} {cleave.arena_offset = 1024 : i64}
// CHECK: cleave.neg %{{.*}} {cleave.arena_offset = 512 : i64}
func.func @chain(%x: tensor<4x32xf32> {cleave.name = "x"}) -> tensor<4x32xf32> {
  %a = cleave.relu %x : tensor<4x32xf32>
  %b = cleave.exp %a : tensor<4x32xf32>
  %c = cleave.neg %b : tensor<4x32xf32>
  return %c : tensor<4x32xf32>
}

// -----

// A view (reshape) has no buffer of its own: it keeps the viewed buffer alive
// until the view's last use, so %b cannot take %a's slot. Parameters live in
// the weights, not the arena.
// CHECK-LABEL: func.func @view
// CHECK-SAME: attributes {cleave.arena_bytes = 2048 : i64, cleave.peak_live_bytes = 2048 : i64}
// CHECK: cleave.param "w"
// CHECK-NOT: cleave.arena_offset
// CHECK: cleave.relu %arg0 {cleave.arena_offset = 512 : i64}
// CHECK: cleave.reshape %{{[^ ]*}} : tensor<4x32xf32> to tensor<128xf32>
// CHECK: cleave.exp %arg0 {cleave.arena_offset = 1024 : i64}
// CHECK: cleave.add {{.*}}{cleave.arena_offset = 1536 : i64}
func.func @view(%x: tensor<4x32xf32> {cleave.name = "x"}) -> (tensor<128xf32>, tensor<4x32xf32>) {
  %w = cleave.param "w" : tensor<4x32xf32>
  %a = cleave.relu %x : tensor<4x32xf32>
  %r = cleave.reshape %a : tensor<4x32xf32> to tensor<128xf32>
  %b = cleave.exp %x : tensor<4x32xf32>
  %s = cleave.add %b, %w : tensor<4x32xf32>, tensor<4x32xf32> -> tensor<4x32xf32>
  return %r, %s : tensor<128xf32>, tensor<4x32xf32>
}

// -----

// A convolution's scratch is live only during the convolution. A 3x3 convolution may run
// oneDNN's primitive, so the scratch is the larger of its im2col matrix, (C/groups * KH * KW)
// x (OH * OW) floats = 27 x 64 x 4 = 6912 bytes, and the primitive's channels-last input
// (768 bytes) and output (1024) with the blocked weight (filters and channels rounded up to
// 16: 16 x 16 x 9 x 4 = 9216): 11008 bytes, next to x (768) and y (1024).
// CHECK-LABEL: func.func @conv_scratch
// CHECK-SAME: attributes {cleave.arena_bytes = 12800 : i64, cleave.peak_live_bytes = 12800 : i64}
// CHECK: cleave.conv2d {{.*}}cleave.arena_offset = {{[0-9]+}} : i64, cleave.scratch_offset = {{[0-9]+}} : i64
func.func @conv_scratch(%x: tensor<1x3x8x8xf32> {cleave.name = "x"}) -> tensor<1x4x8x8xf32> {
  %w = cleave.param "w" : tensor<4x3x3x3xf32>
  %y = cleave.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64}
      : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x8x8xf32>
  return %y : tensor<1x4x8x8xf32>
}
