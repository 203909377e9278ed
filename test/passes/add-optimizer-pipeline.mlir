// RUN: cleave-opt %s -split-input-file -cleave-add-optimizer="optimizer=sgd lr=0.1 clip-grad-norm=1.0" | FileCheck %s

// Stage 0 of 2 (cleave.pipeline): its sum of squares goes to stage 1 with tag free_tag + 0,
// stage 1's comes back with free_tag + 1, and the norm is their sum in stage order. A tied
// weight's copy (cleave.tied_copy) is updated but not counted.
// CHECK-LABEL: func.func @stage0
// CHECK: %[[SQ:.*]] = cleave.mul %arg0, %arg0
// CHECK: %[[SUM:.*]] = cleave.reduce_sum %[[SQ]]
// CHECK-NOT: cleave.mul %arg1, %arg1
// CHECK: cleave.send %[[SUM]] {peer = 1 : i64, tag = 7 : i64}
// CHECK: %[[THEIRS:.*]] = cleave.recv {peer = 1 : i64, tag = 8 : i64} : tensor<f32>
// CHECK: %[[TOTAL:.*]] = cleave.add %[[SUM]], %[[THEIRS]]
// CHECK: cleave.sqrt %[[TOTAL]]
// CHECK-COUNT-2: cleave.sgd
func.func @stage0(%g: tensor<4xf32>, %t: tensor<3xf32>) -> (tensor<4xf32> {cleave.gradient_of = "w", cleave.name = "grad.w"}, tensor<3xf32> {cleave.gradient_of = "tied", cleave.name = "grad.tied", cleave.tied_copy}) attributes {cleave.stage = 0 : i64, cleave.pipeline = {stages = 2 : i64, free_tag = 7 : i64}} {
  %w = cleave.param "w" : tensor<4xf32>
  %tied = cleave.param "tied" : tensor<3xf32>
  return %g, %t : tensor<4xf32>, tensor<3xf32>
}

// -----

// A stage that trains nothing still adds its zero to the norm, in an optimizer phase.
// CHECK-LABEL: func.func @lossOnly
// CHECK: %[[ZERO:.*]] = cleave.constant dense<0.000000e+00>
// CHECK: cleave.send %[[ZERO]] {cleave.phase = "optimizer", peer = 0 : i64, tag = 8 : i64}
// CHECK: %[[FIRST:.*]] = cleave.recv {peer = 0 : i64, tag = 7 : i64}
// CHECK: cleave.add %[[FIRST]], %[[ZERO]]
// CHECK: return %arg0
func.func @lossOnly(%l: tensor<f32>) -> (tensor<f32> {cleave.name = "loss"}) attributes {cleave.stage = 1 : i64, cleave.pipeline = {stages = 2 : i64, free_tag = 7 : i64}} {
  return %l : tensor<f32>
}
