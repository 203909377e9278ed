// RUN: cleave-opt %s -cleave-accumulate-gradients="microbatches=4" | FileCheck %s
// RUN: cleave-opt %s -cleave-accumulate-gradients="microbatches=1" | FileCheck %s --check-prefix=ONE
// RUN: cleave-opt %s -cleave-accumulate-gradients="microbatches=4" -cleave-reduce-gradients="ranks=2" -cleave-add-optimizer | FileCheck %s --check-prefix=STEP

// Backward adds each gradient into its zeroed accumulator as soon as it is
// final; the optimizer phase returns the last running sum over 4 and zeroes
// the accumulator for the next step.
// CHECK-LABEL: func.func @step
// CHECK: %[[W:.*]] = cleave.param "w"
// CHECK: %[[ACC:.*]] = cleave.state "gradient_accumulator.w" : tensor<4x3xf32>
// CHECK: %[[G:.*]] = cleave.relu %[[W]] {cleave.phase = "backward"}
// CHECK-NEXT: %[[SUM:.*]] = cleave.add %[[ACC]], %[[G]]
// CHECK-NEXT: cleave.assign %[[ACC]], %[[SUM]] : tensor<4x3xf32>
// CHECK-NEXT: %[[QUARTER:.*]] = cleave.constant dense<2.500000e-01> : tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = cleave.mul %[[SUM]], %[[QUARTER]] {cleave.phase = "optimizer"}
// CHECK-NEXT: %[[ZERO:.*]] = cleave.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[ZEROS:.*]] = cleave.broadcast_to %[[ZERO]] : tensor<f32> to tensor<4x3xf32>
// CHECK-NEXT: cleave.assign %[[ACC]], %[[ZEROS]]
// CHECK-NEXT: return %{{.*}}, %[[MEAN]]

// ONE-NOT: gradient_accumulator

// With data parallelism the accumulated gradient is reduced once, in the
// optimizer phase, and the loss in every forward.
// STEP-LABEL: func.func @step
// STEP: cleave.reduce_sum
// STEP-NEXT: cleave.all_reduce %{{.*}} {group = "dp"} : tensor<f32>
// STEP: cleave.assign %{{.*}}, %{{.*}} : tensor<4x3xf32>
// STEP: {cleave.phase = "optimizer"}
// STEP: cleave.all_reduce %{{.*}} {group = "dp"} : tensor<12xf32>
// STEP: cleave.adamw
func.func @step(%x: tensor<2x3xf32>) -> (tensor<f32> {cleave.name = "loss"}, tensor<4x3xf32> {cleave.gradient_of = "w", cleave.name = "grad.w"}) {
  %w = cleave.param "w" : tensor<4x3xf32>
  %y = cleave.linear %x, %w : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
  %l = cleave.reduce_sum %y {dims = array<i64: 0, 1>} : tensor<2x4xf32> -> tensor<f32>
  %g = cleave.relu %w {cleave.phase = "backward"} : tensor<4x3xf32>
  return %l, %g : tensor<f32>, tensor<4x3xf32>
}
