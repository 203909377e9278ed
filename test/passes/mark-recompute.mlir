// RUN: cleave-opt %s -split-input-file -cleave-mark-recompute | FileCheck %s
// RUN: cleave-opt %s -split-input-file -cleave-mark-recompute -cleave-mark-recompute | FileCheck %s
// RUN: cleave-opt %s -split-input-file -cleave-insert-collectives -cleave-mark-recompute | FileCheck %s --check-prefix=COMM

// Two recomputed blocks back to back are two regions (one per layer, so
// backward keeps each block's input); the head is not recomputed. Block 0
// reads the function's input (its checkpoint, 64 bytes) and its weight (not
// a checkpoint); its relu and view are read only inside the block, so
// recomputation regenerates 64 bytes of it, the view counting none; its
// linear's output is read after the block, so it is kept. Block 1 reads the
// input too: its own checkpoint.
// CHECK-LABEL: func.func @blocks(
// CHECK-SAME: cleave.recompute_regions = [{checkpoint_bytes = 64 : i64, checkpoints = 1 : i64, layer = "blocks.0", ops = 3 : i64, recomputed_bytes = 64 : i64}, {checkpoint_bytes = 64 : i64, checkpoints = 1 : i64, layer = "blocks.1", ops = 1 : i64, recomputed_bytes = 0 : i64}]
// CHECK: cleave.relu {{.*}}cleave.recompute_region = 0 : i64
// CHECK: cleave.reshape {{.*}}cleave.recompute_region = 0 : i64
// CHECK: cleave.linear {{.*}}cleave.recompute_region = 0 : i64
// CHECK: cleave.neg {{.*}}cleave.recompute_region = 1 : i64
// CHECK: cleave.neg
// CHECK-NOT: recompute_region
// CHECK: return
func.func @blocks(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = cleave.relu %x {cleave.recompute} : tensor<4x4xf32> loc("blocks.0.act")
  %w = cleave.param "blocks.0.fc.weight" : tensor<4x16xf32>
  %v = cleave.reshape %r {cleave.recompute} : tensor<4x4xf32> to tensor<16xf32> loc("blocks.0")
  %y = cleave.linear %v, %w {cleave.recompute} : tensor<16xf32>, tensor<4x16xf32> -> tensor<4xf32> loc("blocks.0.fc")
  %y2 = cleave.reshape %y : tensor<4xf32> to tensor<2x2xf32> loc("blocks.0")
  %z = cleave.neg %x {cleave.recompute} : tensor<4x4xf32> loc("blocks.1.act")
  %h = cleave.neg %z : tensor<4x4xf32> loc("head")
  return %h : tensor<4x4xf32>
}

// -----

// No recomputed op: nothing marked.
// CHECK-LABEL: func.func @none(
// CHECK-NOT: recompute_region
// CHECK: return
func.func @none(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = cleave.relu %x : tensor<4xf32> loc("blocks.0")
  return %r : tensor<4xf32>
}

// -----

// A layout change made for a recomputed reader is recomputed with it: the
// all_reduce of the row-parallel output is in the region, so backward redoes
// the communication rather than keeping the sum.
// COMM-LABEL: func.func @mlp(
// COMM-SAME: cleave.recompute_regions = [{checkpoint_bytes = 128 : i64, checkpoints = 1 : i64, layer = "blocks.0", ops = 4 : i64
// COMM: cleave.linear {{.*}}cleave.recompute_region = 0 : i64
// COMM: cleave.linear {{.*}}cleave.recompute_region = 0 : i64
// COMM: cleave.all_reduce {{.*}}cleave.recompute_region = 0 : i64
// COMM: cleave.add {{.*}}cleave.recompute_region = 0 : i64
func.func @mlp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = cleave.param "blocks.0.fc.weight" {cleave.sharding = ["split(0)"]} : tensor<16x8xf32>
  %w2 = cleave.param "blocks.0.proj.weight" {cleave.sharding = ["split(1)"]} : tensor<8x16xf32>
  %h = cleave.linear %x, %w1 {cleave.recompute, cleave.operand_sharding = ["replicated", "split(0)"], cleave.sharding = ["split(1)"]} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32> loc("blocks.0.fc")
  %y = cleave.linear %h, %w2 {cleave.recompute, cleave.operand_sharding = ["split(1)", "split(1)"], cleave.sharding = ["partial"]} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32> loc("blocks.0.proj")
  %z = cleave.add %x, %y {cleave.recompute, cleave.operand_sharding = ["replicated", "replicated"], cleave.sharding = ["replicated"]} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32> loc("blocks.0")
  return %z : tensor<4x8xf32>
}
