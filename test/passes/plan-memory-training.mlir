// RUN: cleave-opt %s -split-input-file -cleave-plan-memory -verify-diagnostics | FileCheck %s

// A training step: each result of a multi-result op gets its own slot
// (cleave.arena_offsets); training state gets its own region, in program
// order, 64-byte aligned; the arena at its peak is split by phase.
// CHECK-LABEL: func.func @step
// CHECK-SAME: cleave.arena_peak = {activations = [[ACT:[0-9]+]] : i64, gradients = [[GRAD:[0-9]+]] : i64, temporaries = [[TMP:[0-9]+]] : i64}
// CHECK-SAME: cleave.state_bytes = 192 : i64
// CHECK: cleave.state "step" {cleave.state_offset = 0 : i64} : tensor<i64>
// CHECK: cleave.state "optimizer.exp_avg.w" {cleave.state_offset = 64 : i64} : tensor<4x4xf32>
// CHECK: cleave.state "optimizer.exp_avg_sq.w" {cleave.state_offset = 128 : i64} : tensor<4x4xf32>
// CHECK: cleave.layer_norm_backward {{.*}}cleave.arena_offsets = array<i64: [[O1:[0-9]+]], [[O2:[0-9]+]], [[O3:[0-9]+]]>
// CHECK: cleave.adamw
// CHECK-NOT: cleave.arena_offset
// CHECK: return
func.func @step(%x: tensor<2x4xf32> {cleave.name = "x"}) -> (tensor<f32> {cleave.name = "loss"}) {
  %w = cleave.param "w" : tensor<4x4xf32>
  %step = cleave.state "step" : tensor<i64>
  %m = cleave.state "optimizer.exp_avg.w" : tensor<4x4xf32>
  %v = cleave.state "optimizer.exp_avg_sq.w" : tensor<4x4xf32>
  %y = cleave.linear %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %n = cleave.layer_norm %y {normalized_shape = array<i64: 4>, eps = 1.0e-05 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = cleave.reduce_sum %n {dims = array<i64: 0, 1>} : tensor<2x4xf32> -> tensor<f32>
  %g = cleave.broadcast_to %l {cleave.phase = "backward"} : tensor<f32> to tensor<2x4xf32>
  %dx, %dw, %db = cleave.layer_norm_backward %g, %y {normalized_shape = array<i64: 4>, eps = 1.0e-05 : f64}
      : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %gw = cleave.linear_backward_weight %dx, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %one = cleave.constant dense<1> : tensor<i64>
  %next = cleave.add %step, %one {cleave.phase = "optimizer"} : tensor<i64>, tensor<i64> -> tensor<i64>
  cleave.assign %step, %next : tensor<i64>
  cleave.adamw %w, %gw, %m, %v, %next {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
      eps = 1.0e-08 : f64, weight_decay = 1.0e-02 : f64, schedule = "constant", warmup_steps = 0 : i64,
      decay_steps = 0 : i64} : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>
  return %l : tensor<f32>
}

// -----

// An update must be the last reader of the tensor it overwrites.
func.func @read_after_update(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = cleave.param "w" : tensor<4xf32>
  // expected-error @+1 {{overwrites a tensor that a later op reads}}
  cleave.assign %w, %x : tensor<4xf32>
  // expected-note @+1 {{read here}}
  %y = cleave.relu %w : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+2 {{updates target in place, so it must be a cleave.param or cleave.state}}
func.func @assign_to_activation(%x: tensor<4xf32>, %y: tensor<4xf32>) {
  cleave.assign %x, %y : tensor<4xf32>
  return
}
