// RUN: cleave-opt %s -cleave-spill-to-host="activation-layers=l1" -verify-diagnostics | FileCheck %s
// RUN: cleave-opt %s -cleave-spill-to-host="activation-layers=l1" -cleave-plan-memory | FileCheck %s --check-prefix=MEM

// l1's saved activation, its input y0 (8 KiB, which its weight gradient
// reads in backward), leaves the device right after forward computes it and
// comes back a run ahead of its backward reader; l1's other operands (the
// loss gradient, computed in backward; the weight, a param) stay.
// CHECK-LABEL: func.func @step
// CHECK: %[[H:.*]] = cleave.state "host_activation.l1.0" {cleave.pool = "host"} : tensor<32x64xf32>
// CHECK: %[[Y0:.*]] = cleave.linear %arg0
// CHECK-NEXT: cleave.spill %[[H]], %[[Y0]] : tensor<32x64xf32>
// CHECK: %[[AGAIN:.*]] = cleave.state "host_activation.l1.0" {cleave.pool = "host"}
// CHECK-NEXT: %[[BACK:.*]] = cleave.prefetch %[[AGAIN]] {cleave.phase = "backward"}
// CHECK-NEXT: %[[G:.*]] = cleave.broadcast_to
// CHECK-NOT: cleave.phase
// CHECK: cleave.linear_backward_weight %[[G]], %[[BACK]]
// CHECK-NOT: host_activation.l1.1

// The copy in the arena lives only from its prefetch; y0's own buffer ends
// at its spill, so the two never need to be live together.
// MEM-LABEL: func.func @step
// MEM-SAME: cleave.host_state_bytes = 8192 : i64
func.func @step(%x: tensor<32x64xf32> {cleave.name = "x"}) -> (tensor<f32> {cleave.name = "loss"}) {
  %w0 = cleave.param "l0.weight" : tensor<64x64xf32>
  %w1 = cleave.param "l1.weight" : tensor<64x64xf32>
  %y0 = cleave.linear %x, %w0 : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32> loc("l0")
  %y1 = cleave.linear %y0, %w1 : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32> loc("l1")
  %l = cleave.reduce_sum %y1 {dims = array<i64: 0, 1>} : tensor<32x64xf32> -> tensor<f32>
  %g = cleave.broadcast_to %l {cleave.phase = "backward"} : tensor<f32> to tensor<32x64xf32>
  %d0 = cleave.matmul %g, %w1 : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32> loc("l1")
  %gw1 = cleave.linear_backward_weight %g, %y0 : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<64x64xf32> loc("l1")
  %gw0 = cleave.linear_backward_weight %d0, %x : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<64x64xf32> loc("l0")
  return %l : tensor<f32>
}
