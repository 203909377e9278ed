// RUN: cleave-opt %s -cleave-print-summary -o /dev/null | FileCheck %s --strict-whitespace --match-full-lines
// RUN: cleave-opt %s -cleave-print-summary=depth=2 -o /dev/null | FileCheck %s --check-prefix=DEPTH2 --strict-whitespace --match-full-lines

// A ResNet-like model. An op counts in the row of the NameLoc scope of its
// location (also when the NameLoc is inside a FusedLoc); an op without one
// counts in "(root)". Constants and func ops do not count. A param counts in
// the row of its name, under params or, with {buffer}, under buffers. Rows
// come in first-seen order (here the params come first). The columns are
// checked exactly.
//
// Element counts: stem.conv.weight 64*3*7*7 = 9408, stem.bn.{weight,bias} 64
// each, buffers 64 + 64 + 1 (an i64 scalar, 8 bytes); layer1.0.conv1 36864,
// layer1.0.conv2 65536; head.fc 1024000 + 1000. All f32: 4 bytes each.
// depth 1: stem 9536 params, 129 buffers, 9664 * 4 + 8 = 38664 B = 37.8 KiB;
//          layer1 102400 params, 409600 B = 400.0 KiB;
//          head 1025000 params (1.0M), 4100000 B = 3.9 MiB.
// totals:  1136936 params (1.1M), 129 buffers, 4548264 B = 4.3 MiB.
// ops:     stem: conv2d, batch_norm, relu (FusedLoc), max_pool2d = 4;
//          layer1: conv2d, relu, mul, add, conv2d = 5 (the constant is not
//          counted); avgpool 1; (root): the reshape without scope; head 1.

// CHECK:module                                ops       params    buffers        bytes
// CHECK-NEXT:stem                                    4         9.5K        129     37.8 KiB
// CHECK-NEXT:layer1                                  5       102.4K          0    400.0 KiB
// CHECK-NEXT:head                                    1         1.0M          0      3.9 MiB
// CHECK-NEXT:avgpool                                 1            0          0          0 B
// CHECK-NEXT:(root)                                  1            0          0          0 B
// CHECK-NEXT:total                                  12         1.1M        129      4.3 MiB
// CHECK-NEXT:total parameters: 1136936, parameter and buffer bytes: 4548264

// At depth 2 the stem splits into stem.conv, stem.bn and the ops of stem
// itself; layer1.0.relu joins layer1.0.
// DEPTH2:module                                ops       params    buffers        bytes
// DEPTH2-NEXT:stem.conv                               1         9.4K          0     36.8 KiB
// DEPTH2-NEXT:stem.bn                                 1          128        129      1.0 KiB
// DEPTH2-NEXT:layer1.0                                5       102.4K          0    400.0 KiB
// DEPTH2-NEXT:head.fc                                 1         1.0M          0      3.9 MiB
// DEPTH2-NEXT:stem                                    2            0          0          0 B
// DEPTH2-NEXT:avgpool                                 1            0          0          0 B
// DEPTH2-NEXT:(root)                                  1            0          0          0 B
// DEPTH2-NEXT:total                                  12         1.1M        129      4.3 MiB
// DEPTH2-NEXT:total parameters: 1136936, parameter and buffer bytes: 4548264

module {
  func.func @forward(%x: tensor<1x3x32x32xf32>) -> tensor<1x1000xf32> {
    %conv_w = cleave.param "stem.conv.weight" : tensor<64x3x7x7xf32>
    %bn_w = cleave.param "stem.bn.weight" : tensor<64xf32>
    %bn_b = cleave.param "stem.bn.bias" : tensor<64xf32>
    %bn_m = cleave.param "stem.bn.running_mean" {buffer} : tensor<64xf32>
    %bn_v = cleave.param "stem.bn.running_var" {buffer} : tensor<64xf32>
    %bn_n = cleave.param "stem.bn.num_batches_tracked" {buffer} : tensor<i64>
    %c1_w = cleave.param "layer1.0.conv1.weight" : tensor<64x64x3x3xf32>
    %c2_w = cleave.param "layer1.0.conv2.weight" : tensor<1024x64x1x1xf32>
    %fc_w = cleave.param "head.fc.weight" : tensor<1000x1024xf32>
    %fc_b = cleave.param "head.fc.bias" : tensor<1000xf32>
    %0 = cleave.conv2d %x, %conv_w {stride = array<i64: 2, 2>, padding = array<i64: 3, 3>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x32x32xf32>, tensor<64x3x7x7xf32> -> tensor<1x64x16x16xf32> loc("stem.conv"("model.py":10:0))
    %1 = cleave.batch_norm %0, %bn_m, %bn_v weight %bn_w bias %bn_b {eps = 1.0e-05 : f64} : (tensor<1x64x16x16xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x16x16xf32> loc("stem.bn"("model.py":11:0))
    %2 = cleave.relu %1 : tensor<1x64x16x16xf32> loc(fused["model.py":12:0, "stem"("model.py":12:0)])
    %3 = cleave.max_pool2d %2 {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<1x64x16x16xf32> -> tensor<1x64x8x8xf32> loc("stem"("model.py":13:0))
    %4 = cleave.conv2d %3, %c1_w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x64x8x8xf32>, tensor<64x64x3x3xf32> -> tensor<1x64x8x8xf32> loc("layer1.0.conv1"("model.py":20:0))
    %5 = cleave.relu %4 : tensor<1x64x8x8xf32> loc("layer1.0.relu"("model.py":21:0))
    %half = cleave.constant dense<0.5> : tensor<f32> loc("layer1.0"("model.py":22:0))
    %6 = cleave.mul %5, %half : tensor<1x64x8x8xf32>, tensor<f32> -> tensor<1x64x8x8xf32> loc("layer1.0"("model.py":22:0))
    %7 = cleave.add %6, %3 : tensor<1x64x8x8xf32>, tensor<1x64x8x8xf32> -> tensor<1x64x8x8xf32> loc("layer1.0"("model.py":23:0))
    %8 = cleave.conv2d %7, %c2_w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x64x8x8xf32>, tensor<1024x64x1x1xf32> -> tensor<1x1024x8x8xf32> loc("layer1.0.conv2"("model.py":24:0))
    %9 = cleave.adaptive_avg_pool2d %8 {output_size = array<i64: 1, 1>} : tensor<1x1024x8x8xf32> -> tensor<1x1024x1x1xf32> loc("avgpool"("model.py":30:0))
    %10 = cleave.reshape %9 : tensor<1x1024x1x1xf32> to tensor<1x1024xf32> loc("model.py":31:0)
    %11 = cleave.linear %10, %fc_w, %fc_b : tensor<1x1024xf32>, tensor<1000x1024xf32>, tensor<1000xf32> -> tensor<1x1000xf32> loc("head.fc"("model.py":32:0))
    return %11 : tensor<1x1000xf32> loc("model.py":33:0)
  }
}
