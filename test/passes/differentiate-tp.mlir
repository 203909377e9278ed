// RUN: cleave-opt %s -split-input-file -cleave-differentiate -verify-diagnostics | FileCheck %s
// RUN: cleave-opt %s -split-input-file -cleave-differentiate -cleave-specialize-ranks | FileCheck %s --check-prefix=RANKS

// A tp rank's program (-cleave-local-shapes ran: the types are the rank's),
// differentiated as it is. Megatron's MLP after a whole linear: the
// row-parallel proj's partial sum is all-reduced in forward, so its gradient
// passes the all-reduce unchanged; the column-parallel fc gives its whole
// input a partial gradient, all-reduced before the whole linear reads it
// (the input-gradient all-reduce of a column split). The shard's conjugate
// gathers, the gather's conjugate keeps the rank's part. Split weights get
// split gradients, whole ones whole gradients.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: -> (tensor<f32> {cleave.name = "loss"}, tensor<8x8xf32> {{{.*}}"grad.w0"}, tensor<8x8xf32> {{{.*}}"grad.fc.weight"}, tensor<8x8xf32> {{{.*}}"grad.proj.weight"}, tensor<8xf32> {{{.*}}"grad.proj.bias"})
// CHECK: %[[A:.*]] = cleave.linear %arg0
// CHECK: %[[H:.*]] = cleave.linear %[[A]]
// CHECK: cleave.all_gather
// CHECK: cleave.shard %{{.*}} {blocks = 1 : i64, cleave.sharding = ["split(0)"], dim = 0 : i64, group = "tp"} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK: %[[DSUM:.*]] = cleave.all_gather %{{.*}} {blocks = 1 : i64, dim = 0 : i64, group = "tp"} : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[DH:.*]] = cleave.matmul %[[DSUM]], %{{.*}} {cleave.sharding = ["split(1)"]}
// CHECK-NEXT: cleave.linear_backward_weight %[[DSUM]], %[[H]] {cleave.sharding = ["split(1)"]}
// CHECK-NEXT: %[[DB:.*]] = cleave.reduce_sum %[[DSUM]] {dims = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[DA:.*]] = cleave.matmul %[[DH]], %{{.*}} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: cleave.linear_backward_weight %[[DH]], %[[A]] {cleave.sharding = ["split(0)"]}
// CHECK-NEXT: %[[DAS:.*]] = cleave.all_reduce %[[DA]] {group = "tp"} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: cleave.linear_backward_weight %[[DAS]], %arg0 :
// CHECK-NOT: cleave.all_reduce
// CHECK: return
module attributes {cleave.local_shapes, cleave.mesh = {dp = 1 : i64, pp = 1 : i64, tp = 2 : i64}} {
func.func @mlp(%x: tensor<4x8xf32> {cleave.name = "x"}) -> (tensor<f32> {cleave.name = "loss"}) {
  %w0 = cleave.param "w0" {cleave.sharding = ["replicated"]} : tensor<8x8xf32>
  %w1 = cleave.param "fc.weight" {cleave.sharding = ["split(0)"]} : tensor<8x8xf32>
  %w2 = cleave.param "proj.weight" {cleave.sharding = ["split(1)"]} : tensor<8x8xf32>
  %b2 = cleave.param "proj.bias" {cleave.sharding = ["replicated"]} : tensor<8xf32>
  %a = cleave.linear %x, %w0 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %h = cleave.linear %a, %w1 {cleave.sharding = ["split(1)"]} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %y = cleave.linear %h, %w2, %b2 {cleave.sharding = ["partial"]} : tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %sum = cleave.all_reduce %y {cleave.sharding = ["replicated"], group = "tp"} : tensor<4x8xf32> -> tensor<4x8xf32>
  %part = cleave.shard %sum {cleave.sharding = ["split(0)"], group = "tp", dim = 0 : i64, blocks = 1 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
  %r = cleave.relu %part {cleave.sharding = ["split(0)"]} : tensor<2x8xf32>
  %out = cleave.all_gather %r {cleave.sharding = ["replicated"], group = "tp", dim = 0 : i64, blocks = 1 : i64} : tensor<2x8xf32> -> tensor<4x8xf32>
  %l = cleave.reduce_sum %out {dims = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
}

// -----

// Sequence parallelism: a norm runs on the rank's rows (its weight whole,
// read by a split op: a partial gradient, all-reduced), they are gathered
// for a column-parallel linear, whose whole input's partial gradient is
// reduce-scattered straight to the rank's rows: the all-reduce that summed
// it only to be cut again is not built. The reduce-scatter of forward comes
// back as a gather.
// CHECK-LABEL: func.func @sequence_parallel
// CHECK: %[[S:.*]] = cleave.reduce_scatter %{{.*}} {blocks = 1 : i64, cleave.sharding = ["split(0)"], dim = 0 : i64, group = "tp"} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK: %[[DN:.*]] = cleave.matmul %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NOT: cleave.all_reduce %[[DN]]
// CHECK: %[[DS:.*]] = cleave.reduce_scatter %[[DN]] {blocks = 1 : i64, cleave.sharding = ["split(0)"], dim = 0 : i64, group = "tp"} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[DX:.*]], %[[DG:.*]], %{{.*}} = cleave.layer_norm_backward %[[DS]], %[[S]]
// CHECK-NEXT: cleave.all_gather %[[DX]] {blocks = 1 : i64, dim = 0 : i64, group = "tp"} : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK: cleave.all_reduce %[[DG]] {group = "tp"} : tensor<8xf32> -> tensor<8xf32>
module attributes {cleave.local_shapes, cleave.mesh = {dp = 1 : i64, pp = 1 : i64, tp = 2 : i64}} {
func.func @sequence_parallel(%x: tensor<4x8xf32> {cleave.name = "x"}) -> (tensor<f32> {cleave.name = "loss"}) {
  %w0 = cleave.param "w0" {cleave.sharding = ["split(1)"]} : tensor<8x4xf32>
  %g = cleave.param "norm.weight" {cleave.sharding = ["replicated"]} : tensor<8xf32>
  %w1 = cleave.param "fc.weight" {cleave.sharding = ["split(0)"]} : tensor<8x8xf32>
  %x0 = cleave.shard %x {cleave.sharding = ["split(1)"], group = "tp", dim = 1 : i64, blocks = 1 : i64} : tensor<4x8xf32> -> tensor<4x4xf32>
  %p = cleave.linear %x0, %w0 {cleave.sharding = ["partial"]} : tensor<4x4xf32>, tensor<8x4xf32> -> tensor<4x8xf32>
  %s = cleave.reduce_scatter %p {cleave.sharding = ["split(0)"], group = "tp", dim = 0 : i64, blocks = 1 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
  %n = cleave.layer_norm %s weight %g {cleave.sharding = ["split(0)"], normalized_shape = array<i64: 8>, eps = 1.0e-05 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %full = cleave.all_gather %n {cleave.sharding = ["replicated"], group = "tp", dim = 0 : i64, blocks = 1 : i64} : tensor<2x8xf32> -> tensor<4x8xf32>
  %h = cleave.linear %full, %w1 {cleave.sharding = ["split(1)"]} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %out = cleave.all_gather %h {cleave.sharding = ["replicated"], group = "tp", dim = 1 : i64, blocks = 1 : i64} : tensor<4x8xf32> -> tensor<4x16xf32>
  %l = cleave.reduce_sum %out {dims = array<i64: 0, 1>} : tensor<4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}
}

// -----

// A vocabulary split over the tp group (vocab-parallel embedding): each
// rank's table gradient is its rows' (split(0), marked on the backward op),
// so each tp index's copy scatters from its first row, as its lookup reads.
// CHECK-LABEL: func.func @vocabulary
// CHECK: cleave.embedding_backward %{{.*}}, %arg0 {cleave.sharding = ["split(0)"]} : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<8x4xf32>
// RANKS-LABEL: func.func @vocabulary_tp0(
// RANKS: cleave.embedding_backward %{{.*}}, %arg0 {cleave.sharding = ["split(0)"], row_offset = 0 : i64}
// RANKS-LABEL: func.func @vocabulary_tp1(
// RANKS: cleave.embedding %{{.*}}, %arg0 {cleave.sharding = ["partial"], row_offset = 8 : i64}
// RANKS: cleave.embedding_backward %{{.*}}, %arg0 {cleave.sharding = ["split(0)"], row_offset = 8 : i64}
module attributes {cleave.local_shapes, cleave.mesh = {dp = 1 : i64, pp = 1 : i64, tp = 2 : i64}} {
func.func @vocabulary(%ids: tensor<2x3xi64> {cleave.name = "ids"}) -> (tensor<f32> {cleave.name = "loss"}) {
  %w = cleave.param "tok_emb.weight" {cleave.sharding = ["split(0)"]} : tensor<8x4xf32>
  %e = cleave.embedding %w, %ids {cleave.sharding = ["partial"]} : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %s = cleave.all_reduce %e {cleave.sharding = ["replicated"], group = "tp"} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %l = cleave.reduce_sum %s {dims = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
}
