// RUN: cleave-opt %s -cleave-convert-precision="dtype=bf16 master-weights=true" | FileCheck %s

// Master weights: parameters, buffers and states keep f32; each is cast to
// bf16 just before its first compute reader. An update keeps writing the f32
// tensor and reads f32: the bf16 statistics are cast back.
// CHECK-LABEL: func.func @step
// CHECK: %[[W:.*]] = cleave.param "w" : tensor<4x4xf32>
// CHECK: %[[RM:.*]] = cleave.param "rm" {buffer} : tensor<4xf32>
// CHECK: %[[RV:.*]] = cleave.param "rv" {buffer} : tensor<4xf32>
// CHECK: %[[X:.*]] = cleave.cast %arg0 : tensor<2x4x2x2xf32> to tensor<2x4x2x2xbf16>
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[VAR:.*]] = cleave.batch_norm_train %[[X]] {eps = 1.000000e-05 : f64} : (tensor<2x4x2x2xbf16>) -> (tensor<2x4x2x2xbf16>, tensor<4xbf16>, tensor<4xbf16>)
// CHECK: %[[M32:.*]] = cleave.cast %[[MEAN]] : tensor<4xbf16> to tensor<4xf32>
// CHECK: %[[V32:.*]] = cleave.cast %[[VAR]] : tensor<4xbf16> to tensor<4xf32>
// CHECK: cleave.update_running_stats %[[RM]], %[[RV]], %[[M32]], %[[V32]]
// CHECK: %[[WB:.*]] = cleave.cast %[[W]] : tensor<4x4xf32> to tensor<4x4xbf16>
// CHECK: cleave.linear %{{.*}}, %[[WB]] : tensor<2x2x2x4xbf16>, tensor<4x4xbf16>
func.func @step(%x: tensor<2x4x2x2xf32>) -> tensor<2x2x2x4xf32> {
  %w = cleave.param "w" : tensor<4x4xf32>
  %rm = cleave.param "rm" {buffer} : tensor<4xf32>
  %rv = cleave.param "rv" {buffer} : tensor<4xf32>
  %y, %mean, %var = cleave.batch_norm_train %x {eps = 1.0e-05 : f64} : (tensor<2x4x2x2xf32>) -> (tensor<2x4x2x2xf32>, tensor<4xf32>, tensor<4xf32>)
  cleave.update_running_stats %rm, %rv, %mean, %var {momentum = 0.1 : f64, count = 8 : i64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  %p = cleave.permute %y {dims = array<i64: 0, 2, 3, 1>} : tensor<2x4x2x2xf32> -> tensor<2x2x2x4xf32>
  %z = cleave.linear %p, %w : tensor<2x2x2x4xf32>, tensor<4x4xf32> -> tensor<2x2x2x4xf32>
  return %z : tensor<2x2x2x4xf32>
}
