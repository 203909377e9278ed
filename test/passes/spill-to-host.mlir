// RUN: cleave-opt %s -cleave-spill-to-host="parameters=l1.weight" -verify-diagnostics | FileCheck %s
// RUN: cleave-opt %s -cleave-spill-to-host="parameters=l1.weight" -cleave-plan-memory -verify-diagnostics | FileCheck %s --check-prefix=MEM

// l1.weight moves to the host: its forward reader reads a prefetch placed at
// the start of the layer before (l0), its backward reader one placed at the
// start of the run before (the loss gradient), which takes over the phase
// mark; its gradient is spilled to a host state right after backward makes
// it, and the update reads that copy, with its moments on the host too.
// l0.weight stays on the device.
// CHECK-LABEL: func.func @step
// CHECK-DAG: %[[W0:.*]] = cleave.param "l0.weight" : tensor<4x4xf32>
// CHECK-DAG: %[[W1:.*]] = cleave.param "l1.weight" {cleave.pool = "host"} : tensor<4x4xf32>
// CHECK-DAG: cleave.state "optimizer.exp_avg.l0.weight" : tensor<4x4xf32>
// CHECK-DAG: %[[M1:.*]] = cleave.state "optimizer.exp_avg.l1.weight" {cleave.pool = "host"}
// CHECK-DAG: %[[V1:.*]] = cleave.state "optimizer.exp_avg_sq.l1.weight" {cleave.pool = "host"}
// CHECK-DAG: %[[HG:.*]] = cleave.state "host_gradient.l1.weight" {cleave.pool = "host"} : tensor<4x4xf32>
// CHECK: %[[F1:.*]] = cleave.prefetch %[[W1]] : tensor<4x4xf32>
// CHECK-NEXT: %[[Y0:.*]] = cleave.linear %arg0, %[[W0]]
// CHECK-NEXT: cleave.linear %[[Y0]], %[[F1]]
// CHECK: %[[B1:.*]] = cleave.prefetch %[[W1]] {cleave.phase = "backward"}
// CHECK-NEXT: %[[G:.*]] = cleave.broadcast_to
// CHECK-NOT: cleave.phase
// CHECK-NEXT: cleave.matmul %[[G]], %[[B1]]
// CHECK-NEXT: %[[GW1:.*]] = cleave.linear_backward_weight %[[G]], %[[Y0]]
// CHECK-NEXT: cleave.spill %[[HG]], %[[GW1]] : tensor<4x4xf32>
// CHECK: cleave.adamw %[[W0]]
// CHECK: %[[HG2:.*]] = cleave.state "host_gradient.l1.weight" {cleave.pool = "host"}
// CHECK-NEXT: cleave.adamw %[[W1]], %[[HG2]], %[[M1]], %[[V1]]

// The host states get their own region; the device's keeps the rest.
// MEM-LABEL: func.func @step
// MEM-SAME: cleave.host_state_bytes = 192 : i64
// MEM-SAME: cleave.state_bytes = 192 : i64
// MEM-DAG: cleave.state "optimizer.exp_avg.l1.weight" {cleave.pool = "host", cleave.state_offset = 0 : i64}
// MEM-DAG: cleave.state "host_gradient.l1.weight" {cleave.pool = "host", cleave.state_offset = 128 : i64}
// MEM-DAG: cleave.state "optimizer.exp_avg.l0.weight" {cleave.state_offset = 64 : i64}
func.func @step(%x: tensor<2x4xf32> {cleave.name = "x"}) -> (tensor<f32> {cleave.name = "loss"}) {
  %w0 = cleave.param "l0.weight" : tensor<4x4xf32>
  %w1 = cleave.param "l1.weight" : tensor<4x4xf32>
  %step = cleave.state "step" : tensor<i64>
  %m0 = cleave.state "optimizer.exp_avg.l0.weight" : tensor<4x4xf32>
  %v0 = cleave.state "optimizer.exp_avg_sq.l0.weight" : tensor<4x4xf32>
  %m1 = cleave.state "optimizer.exp_avg.l1.weight" : tensor<4x4xf32>
  %v1 = cleave.state "optimizer.exp_avg_sq.l1.weight" : tensor<4x4xf32>
  %y0 = cleave.linear %x, %w0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("l0")
  %y1 = cleave.linear %y0, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("l1")
  %l = cleave.reduce_sum %y1 {dims = array<i64: 0, 1>} : tensor<2x4xf32> -> tensor<f32>
  %g = cleave.broadcast_to %l {cleave.phase = "backward"} : tensor<f32> to tensor<2x4xf32>
  %d0 = cleave.matmul %g, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("l1")
  %gw1 = cleave.linear_backward_weight %g, %y0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32> loc("l1")
  %gw0 = cleave.linear_backward_weight %d0, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32> loc("l0")
  %one = cleave.constant dense<1> : tensor<i64>
  %next = cleave.add %step, %one {cleave.phase = "optimizer"} : tensor<i64>, tensor<i64> -> tensor<i64>
  cleave.assign %step, %next : tensor<i64>
  cleave.adamw %w0, %gw0, %m0, %v0, %next {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
      eps = 1.0e-08 : f64, weight_decay = 1.0e-02 : f64, schedule = "constant", warmup_steps = 0 : i64,
      decay_steps = 0 : i64} : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>
  cleave.adamw %w1, %gw1, %m1, %v1, %next {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
      eps = 1.0e-08 : f64, weight_decay = 1.0e-02 : f64, schedule = "constant", warmup_steps = 0 : i64,
      decay_steps = 0 : i64} : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>
  return %l : tensor<f32>
}

