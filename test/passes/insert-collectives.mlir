// RUN: cleave-opt %s -split-input-file -verify-diagnostics -cleave-insert-collectives | FileCheck %s

// Megatron's MLP: column-parallel fc (hidden split), row-parallel proj
// (partial sums), summed once before the residual add; a second reader of
// the sum reuses it. The function returns replicated values.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %[[X:.*]]: tensor<4x8xf32>
func.func @mlp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = cleave.param "fc.weight" {cleave.sharding = ["split(0)"]} : tensor<16x8xf32>
  %w2 = cleave.param "proj.weight" {cleave.sharding = ["split(1)"]} : tensor<8x16xf32>
  // CHECK: %[[H:.*]] = cleave.linear %[[X]],
  %h = cleave.linear %x, %w1 {cleave.operand_sharding = ["replicated", "split(0)"], cleave.sharding = ["split(1)"], cleave.stage = 0 : i64} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  // CHECK-NEXT: %[[G:.*]] = cleave.gelu %[[H]]
  %g = cleave.gelu %h {cleave.operand_sharding = ["split(1)"], cleave.sharding = ["split(1)"]} : tensor<4x16xf32>
  // CHECK-NEXT: %[[Y:.*]] = cleave.linear %[[G]],
  %y = cleave.linear %g, %w2 {cleave.operand_sharding = ["split(1)", "split(1)"], cleave.sharding = ["partial"], cleave.stage = 0 : i64} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
  // CHECK-NEXT: %[[SUM:.*]] = cleave.all_reduce %[[Y]] {cleave.sharding = ["replicated"], cleave.stage = 0 : i64, group = "tp"} : tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK-NEXT: %[[Z:.*]] = cleave.add %[[X]], %[[SUM]]
  %z = cleave.add %x, %y {cleave.operand_sharding = ["replicated", "replicated"], cleave.sharding = ["replicated"], cleave.stage = 0 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK-NEXT: %[[ZS:.*]] = cleave.shard %[[Z]] {blocks = 1 : i64, cleave.sharding = ["split(0)"], cleave.stage = 0 : i64, dim = 0 : i64, group = "tp"} : tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK-NEXT: %[[S:.*]] = cleave.add %[[ZS]], %[[SUM]]
  %s = cleave.add %z, %y {cleave.operand_sharding = ["split(0)", "replicated"], cleave.sharding = ["split(0)"]} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK-NEXT: %[[OUT:.*]] = cleave.all_gather %[[S]] {blocks = 1 : i64, cleave.sharding = ["replicated"], dim = 0 : i64, group = "tp"} : tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK-NEXT: return %[[OUT]]
  return %s : tensor<4x8xf32>
}

// -----

// Partial sums kept split (reduce-scatter), and one split traded for another
// (all-to-all), in the blocked layout of a fused QKV output.
// CHECK-LABEL: func.func @scatter_and_trade(
func.func @scatter_and_trade(%x: tensor<4x8xf32>, %w: tensor<96x8xf32>) -> tensor<4x96xf32> {
  %p = cleave.linear %x, %w {cleave.operand_sharding = ["split(1)", "split(1)"], cleave.sharding = ["partial"]} : tensor<4x8xf32>, tensor<96x8xf32> -> tensor<4x96xf32>
  // CHECK: %[[RS:.*]] = cleave.reduce_scatter %{{.*}} {blocks = 3 : i64, cleave.sharding = ["split(1, blocks=3)"], dim = 1 : i64, group = "tp"}
  // CHECK-NEXT: cleave.relu %[[RS]]
  %r = cleave.relu %p {cleave.operand_sharding = ["split(1, blocks=3)"], cleave.sharding = ["split(1, blocks=3)"]} : tensor<4x96xf32>
  // CHECK-NEXT: %[[A2A:.*]] = cleave.all_to_all %{{.*}} {cleave.sharding = ["split(0)"], from_blocks = 3 : i64, from_dim = 1 : i64, group = "tp", to_blocks = 1 : i64, to_dim = 0 : i64}
  // CHECK-NEXT: cleave.neg %[[A2A]]
  %n = cleave.neg %r {cleave.operand_sharding = ["split(0)"], cleave.sharding = ["split(0)"]} : tensor<4x96xf32>
  // CHECK-NEXT: cleave.all_gather
  return %n : tensor<4x96xf32>
}

// -----

// Nothing to do where layouts agree (tp = 1, or ops that are not split).
// CHECK-LABEL: func.func @unsplit(
// CHECK-NOT: cleave.all_{{[a-z_]+}} %
// CHECK-NOT: cleave.shard %
// CHECK: return
func.func @unsplit(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = cleave.relu %x {cleave.operand_sharding = ["replicated"], cleave.sharding = ["replicated"]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @bad_layout(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{operand 0: not a layout an op can need: "split(x)"}}
  %y = cleave.relu %x {cleave.operand_sharding = ["split(x)"], cleave.sharding = ["replicated"]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @partial_operand(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{operand 0: not a layout an op can need: "partial"}}
  %y = cleave.relu %x {cleave.operand_sharding = ["partial"], cleave.sharding = ["replicated"]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @count(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{cleave.operand_sharding has 2 layouts for 1 operands}}
  %y = cleave.relu %x {cleave.operand_sharding = ["replicated", "replicated"], cleave.sharding = ["replicated"]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @uneven(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // A layout the tensor cannot take: 3 blocks of a dim of 8.
  // expected-error @+1 {{'cleave.shard' op blocks 3 does not divide dim 1 of size 8}}
  %y = cleave.relu %x {cleave.operand_sharding = ["split(1, blocks=3)"], cleave.sharding = ["replicated"]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
