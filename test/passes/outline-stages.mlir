// RUN: cleave-opt %s -split-input-file -verify-diagnostics -cleave-outline-stages | FileCheck %s

// Three stages: %h crosses from stage 0 to stages 1 and 2 (one send per
// reader; tags number the crossings as the readers first need them), the
// tied weight is held by both stages that read it, the input
// %y goes to the stage that reads it, and each output comes from the stage
// that computes it.
// CHECK-LABEL: func.func @forward_stage0(
// CHECK-SAME: %[[X:.*]]: tensor<4x8xf32> {cleave.name = "x"}) -> (tensor<4x8xf32> {cleave.name = "early"})
// CHECK-SAME: attributes {cleave.stage = 0 : i64}
// CHECK-NEXT: %[[W:.*]] = cleave.param "emb.weight" : tensor<8x8xf32>
// CHECK-NEXT: %[[H:.*]] = cleave.linear %[[X]], %[[W]]
// CHECK-NEXT: %[[E:.*]] = cleave.relu %[[H]]
// CHECK-NEXT: cleave.send %[[H]] {peer = 1 : i64, tag = 0 : i64} : tensor<4x8xf32>
// CHECK-NEXT: cleave.send %[[H]] {peer = 2 : i64, tag = 2 : i64} : tensor<4x8xf32>
// CHECK-NEXT: return %[[E]]
// CHECK-LABEL: func.func @forward_stage1(
// CHECK-SAME: %[[Y:.*]]: tensor<4x8xf32> {cleave.name = "y"}) attributes {cleave.stage = 1 : i64}
// CHECK-NEXT: %[[R:.*]] = cleave.recv {peer = 0 : i64, tag = 0 : i64} : tensor<4x8xf32>
// CHECK-NEXT: %[[A:.*]] = cleave.add %[[R]], %[[Y]]
// CHECK-NEXT: cleave.send %[[A]] {peer = 2 : i64, tag = 1 : i64} : tensor<4x8xf32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func @forward_stage2() -> (tensor<4x8xf32> {cleave.name = "logits"}) attributes {cleave.stage = 2 : i64}
// CHECK-NEXT: %[[R2:.*]] = cleave.recv {peer = 1 : i64, tag = 1 : i64} : tensor<4x8xf32>
// CHECK-NEXT: %[[R0:.*]] = cleave.recv {peer = 0 : i64, tag = 2 : i64} : tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]] = cleave.add %[[R2]], %[[R0]]
// CHECK-NEXT: %[[W2:.*]] = cleave.param "emb.weight" : tensor<8x8xf32>
// CHECK-NEXT: %[[L:.*]] = cleave.linear %[[S]], %[[W2]]
// CHECK-NEXT: return %[[L]]
// CHECK-NOT: func.func @forward(
func.func @forward(%x: tensor<4x8xf32> {cleave.name = "x"}, %y: tensor<4x8xf32> {cleave.name = "y"})
    -> (tensor<4x8xf32> {cleave.name = "early"}, tensor<4x8xf32> {cleave.name = "logits"}) {
  %w = cleave.param "emb.weight" : tensor<8x8xf32>
  %h = cleave.linear %x, %w {cleave.stage = 0 : i64} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %e = cleave.relu %h {cleave.stage = 0 : i64} : tensor<4x8xf32>
  %a = cleave.add %h, %y {cleave.stage = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %s = cleave.add %a, %h {cleave.stage = 2 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %l = cleave.linear %s, %w {cleave.stage = 2 : i64} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  return %e, %l : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Interleaved: one function per model chunk, numbered by chunk, each with its
// device stage.
// CHECK-LABEL: func.func @forward_chunk0(
// CHECK-SAME: attributes {cleave.chunk = 0 : i64, cleave.stage = 0 : i64}
// CHECK: cleave.send %{{.*}} {peer = 1 : i64, tag = 0 : i64}
// CHECK-LABEL: func.func @forward_chunk1(
// CHECK-SAME: attributes {cleave.chunk = 1 : i64, cleave.stage = 1 : i64}
// CHECK: cleave.send %{{.*}} {peer = 2 : i64, tag = 1 : i64}
// CHECK-LABEL: func.func @forward_chunk2(
// CHECK-SAME: attributes {cleave.chunk = 2 : i64, cleave.stage = 0 : i64}
func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = cleave.relu %x {cleave.stage = 0 : i64, cleave.chunk = 0 : i64} : tensor<4x8xf32>
  %b = cleave.neg %a {cleave.stage = 1 : i64, cleave.chunk = 1 : i64} : tensor<4x8xf32>
  %c = cleave.relu %b {cleave.stage = 0 : i64, cleave.chunk = 2 : i64} : tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// -----

func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{has no cleave.stage: plan the model first (cleave-plan-parallelism)}}
  %a = cleave.relu %x : tensor<4x8xf32>
  return %a : tensor<4x8xf32>
}

// -----

func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = cleave.relu %x {cleave.stage = 1 : i64} : tensor<4x8xf32>
  // expected-error @+1 {{reads a value of pipeline unit 1, which runs after its own unit 0}}
  %b = cleave.neg %a {cleave.stage = 0 : i64} : tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{cleave-outline-stages needs a @forward function}}
module {
  func.func @other() {
    return
  }
}
