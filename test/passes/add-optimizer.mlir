// RUN: cleave-opt %s -split-input-file -cleave-add-optimizer | FileCheck %s --check-prefix=ADAMW
// RUN: cleave-opt %s -split-input-file -cleave-add-optimizer="optimizer=sgd lr=0.5 momentum=0.9 nesterov=true clip-grad-norm=1.0" | FileCheck %s --check-prefix=SGD
// RUN: cleave-opt %s -split-input-file -cleave-add-optimizer="early-updates=true" | FileCheck %s --check-prefix=EARLY
// RUN: not cleave-opt %s -split-input-file -cleave-add-optimizer="optimizer=sgd" 2>&1 | FileCheck %s --check-prefix=NOLR
// RUN: not cleave-opt %s -split-input-file -cleave-add-optimizer="lr-schedule=cosine" 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: not cleave-opt %s -split-input-file -cleave-add-optimizer="optimizer=sgd lr=1 nesterov=true" 2>&1 | FileCheck %s --check-prefix=NESTEROV

// AdamW with torch's defaults: two zeroed moments per parameter, the step
// counter incremented (and written back) before the updates read it, the
// gradients consumed: the function returns the loss alone.
// ADAMW-LABEL: func.func @step
// ADAMW-SAME: -> (tensor<f32> {cleave.name = "loss"})
// ADAMW: %[[W:.*]] = cleave.param "w"
// ADAMW: %[[STEP:.*]] = cleave.state "step" : tensor<i64>
// ADAMW: %[[M:.*]] = cleave.state "optimizer.exp_avg.w" : tensor<4x3xf32>
// ADAMW: %[[V:.*]] = cleave.state "optimizer.exp_avg_sq.w" : tensor<4x3xf32>
// ADAMW: %[[ONE:.*]] = cleave.constant dense<1> : tensor<i64>
// ADAMW: %[[NEXT:.*]] = cleave.add %[[STEP]], %[[ONE]] {cleave.phase = "optimizer"}
// ADAMW: cleave.assign %[[STEP]], %[[NEXT]] : tensor<i64>
// ADAMW: cleave.adamw %[[W]], %{{.*}}, %[[M]], %[[V]], %[[NEXT]] {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, decay_steps = 0 : i64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, schedule = "constant", warmup_steps = 0 : i64, weight_decay = 1.000000e-02 : f64}
// ADAMW: return %{{.*}} : tensor<f32>

// SGD with momentum, Nesterov and clipping: the global norm scales every
// gradient through the update's grad_scale operand.
// SGD-LABEL: func.func @step
// SGD: %[[W:.*]] = cleave.param "w"
// SGD: %[[BUF:.*]] = cleave.state "optimizer.momentum_buffer.w"
// SGD: %[[SQ:.*]] = cleave.mul %[[G:.*]], %[[G]] {cleave.phase = "optimizer"}
// SGD: cleave.reduce_sum %[[SQ]] {dims = array<i64: 0, 1>}
// SGD: %[[NORM:.*]] = cleave.sqrt
// SGD: %[[DEN:.*]] = cleave.add %[[NORM]]
// SGD: %[[COEF:.*]] = cleave.div %{{.*}}, %[[DEN]]
// SGD: %[[SCALE:.*]] = cleave.minimum %[[COEF]]
// SGD: cleave.sgd %[[W]], %[[G]] momentum_buffer %[[BUF]] step %{{.*}} grad_scale %[[SCALE]] {dampening = 0.000000e+00 : f64, {{.*}}lr = 5.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = true, {{.*}}weight_decay = 0.000000e+00 : f64}

// Early updates: the update follows its gradient at once, inside the
// backward phase (no optimizer mark on it); the step counter's write-back
// comes last and starts the optimizer phase.
// EARLY-LABEL: func.func @step
// EARLY: %[[G:.*]] = cleave.relu %{{.*}} {cleave.phase = "backward"}
// EARLY-NEXT: %[[ONE:.*]] = cleave.constant dense<1> : tensor<i64>
// EARLY-NEXT: %[[NEXT:.*]] = cleave.add
// EARLY-NEXT: cleave.adamw %{{.*}}, %[[G]], %{{.*}}, %{{.*}}, %[[NEXT]] {
// EARLY-NEXT: cleave.assign %{{.*}}, %[[NEXT]] {cleave.phase = "optimizer"}

// NOLR: error: cleave-add-optimizer: sgd has no default learning rate (torch.optim.SGD requires lr): give one
// DECAY: error: cleave-add-optimizer: a cosine schedule needs decay-steps: the step where it reaches 0
// NESTEROV: error: cleave-add-optimizer: nesterov momentum requires a momentum and zero dampening
func.func @step(%x: tensor<2x3xf32>) -> (tensor<f32> {cleave.name = "loss"}, tensor<4x3xf32> {cleave.gradient_of = "w", cleave.name = "grad.w"}) {
  %w = cleave.param "w" : tensor<4x3xf32>
  %y = cleave.linear %x, %w : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
  %l = cleave.reduce_sum %y {dims = array<i64: 0, 1>} : tensor<2x4xf32> -> tensor<f32>
  %g = cleave.relu %w {cleave.phase = "backward"} : tensor<4x3xf32>
  return %l, %g : tensor<f32>, tensor<4x3xf32>
}
