// RUN: cleave-opt %s -split-input-file -verify-diagnostics -cleave-local-shapes | FileCheck %s
// RUN: cleave-opt %s -split-input-file -verify-diagnostics -cleave-local-shapes -cleave-specialize-ranks | FileCheck %s --check-prefix=RANKS

// Megatron's MLP at tp = 2, collectives explicit: the column-parallel fc
// holds half the rows of its weight and computes half the hidden units; the
// row-parallel proj reads them and leaves a partial sum of the full shape.
// CHECK-LABEL: func.func @forward_stage0(
// CHECK: cleave.param "fc.weight" {{.*}} : tensor<8x8xf32>
// CHECK: cleave.param "proj.weight" {{.*}} : tensor<8x8xf32>
// CHECK: cleave.linear {{.*}} -> tensor<4x8xf32>
// CHECK: cleave.linear {{.*}} : tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK: cleave.all_reduce {{.*}} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK: cleave.shard {{.*}} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK: cleave.all_gather {{.*}} : tensor<2x8xf32> -> tensor<4x8xf32>

// Each tp index gets its own copy; the bias of the partial sum is added by
// tp index 0 only, and the shard is the rank's rows.
// RANKS-LABEL: func.func @forward_stage0_tp0(
// RANKS-SAME: attributes {cleave.stage = 0 : i64, cleave.tp = 0 : i64}
// RANKS: cleave.linear %{{.*}}, %{{.*}}, %{{.*}} {{.*}} : tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// RANKS: cleave.slice %{{.*}} {{{.*}}dim = 0 : i64, end = 2 : i64, start = 0 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
// RANKS-NOT: cleave.shard %
// RANKS-LABEL: func.func @forward_stage0_tp1(
// RANKS: cleave.linear %{{.*}}, %{{.*}} {{{.*}}cleave.sharding = ["partial"]{{.*}}} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// RANKS: cleave.slice %{{.*}} {{{.*}}dim = 0 : i64, end = 4 : i64, start = 2 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
// RANKS-NOT: func.func @forward_stage0(
module attributes {cleave.mesh = {dp = 1 : i64, pp = 1 : i64, tp = 2 : i64}} {
  func.func @forward_stage0(%x: tensor<4x8xf32> {cleave.name = "x"}) -> (tensor<4x8xf32> {cleave.name = "output_0"}) attributes {cleave.stage = 0 : i64} {
    %w1 = cleave.param "fc.weight" {cleave.sharding = ["split(0)"]} : tensor<16x8xf32>
    %w2 = cleave.param "proj.weight" {cleave.sharding = ["split(1)"]} : tensor<8x16xf32>
    %b2 = cleave.param "proj.bias" {cleave.sharding = ["replicated"]} : tensor<8xf32>
    %h = cleave.linear %x, %w1 {cleave.sharding = ["split(1)"]} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
    %y = cleave.linear %h, %w2, %b2 {cleave.sharding = ["partial"]} : tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %sum = cleave.all_reduce %y {cleave.sharding = ["replicated"], group = "tp"} : tensor<4x8xf32> -> tensor<4x8xf32>
    %part = cleave.shard %sum {cleave.sharding = ["split(0)"], group = "tp", dim = 0 : i64, blocks = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %r = cleave.relu %part {cleave.sharding = ["split(0)"]} : tensor<4x8xf32>
    %out = cleave.all_gather %r {cleave.sharding = ["replicated"], group = "tp", dim = 0 : i64, blocks = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    return %out : tensor<4x8xf32>
  }
}

// -----

// A vocabulary split over the tp group: each rank holds half the rows and
// looks up from its first row; the fused QKV projection is split in three
// blocks, and a slice of one block takes the rank's part of it.
// CHECK-LABEL: func.func @forward_stage0(
// CHECK: cleave.embedding {{.*}} : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
// CHECK: cleave.slice {{.*}}end = 4 : i64, start = 2 : i64} : tensor<2x3x6xf32> -> tensor<2x3x2xf32>
// RANKS-LABEL: func.func @forward_stage0_tp0(
// RANKS: cleave.embedding {{.*}}row_offset = 0 : i64} : tensor<8x4xf32>
// RANKS: cleave.slice %{{.*}} {{{.*}}dim = 2 : i64, end = 2 : i64, start = 0 : i64} : tensor<2x3x12xf32> -> tensor<2x3x2xf32>
// RANKS-NEXT: cleave.slice %{{.*}} {{{.*}}dim = 2 : i64, end = 6 : i64, start = 4 : i64}
// RANKS-NEXT: cleave.slice %{{.*}} {{{.*}}dim = 2 : i64, end = 10 : i64, start = 8 : i64}
// RANKS-NEXT: cleave.concat {{.*}} -> tensor<2x3x6xf32>
// RANKS-LABEL: func.func @forward_stage0_tp1(
// RANKS: cleave.embedding {{.*}}row_offset = 8 : i64} : tensor<8x4xf32>
// RANKS: cleave.slice %{{.*}} {{{.*}}dim = 2 : i64, end = 4 : i64, start = 2 : i64} : tensor<2x3x12xf32> -> tensor<2x3x2xf32>
module attributes {cleave.mesh = {dp = 1 : i64, pp = 1 : i64, tp = 2 : i64}} {
  func.func @forward_stage0(%idx: tensor<2x3xi64> {cleave.name = "idx"}, %qkv: tensor<2x3x12xf32> {cleave.name = "qkv"}) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) attributes {cleave.stage = 0 : i64} {
    %table = cleave.param "emb.weight" {cleave.sharding = ["split(0)"]} : tensor<16x4xf32>
    %e = cleave.embedding %table, %idx {cleave.sharding = ["partial"]} : tensor<16x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
    %sum = cleave.all_reduce %e {cleave.sharding = ["replicated"], group = "tp"} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
    %parts = cleave.shard %qkv {cleave.sharding = ["split(2, blocks=3)"], group = "tp", dim = 2 : i64, blocks = 3 : i64} : tensor<2x3x12xf32> -> tensor<2x3x12xf32>
    %k = cleave.slice %parts {cleave.sharding = ["split(2)"], dim = 2 : i64, start = 4 : i64, end = 8 : i64} : tensor<2x3x12xf32> -> tensor<2x3x4xf32>
    %kk = cleave.all_gather %k {cleave.sharding = ["replicated"], group = "tp", dim = 2 : i64, blocks = 1 : i64} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
    return %sum, %kk : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  }
}

// -----

// A cut of one whole block of a blocked layout keeps the rank's rows of it:
// the blocks are the whole dim's (16 rows, 2 blocks of 8, 2 rows of each on
// each of 4 ranks), so rows [0, 8) are the rank's first 2 (LLaMA's rotary
// table cut to the sequence).
// CHECK-LABEL: func.func @forward_stage0(
// CHECK: cleave.param "rope_cos" {{.*}} : tensor<4x8xf32>
// CHECK: cleave.slice {{.*}}end = 2 : i64, start = 0 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
module attributes {cleave.mesh = {dp = 1 : i64, pp = 1 : i64, tp = 4 : i64}} {
  func.func @forward_stage0() -> tensor<8x8xf32> attributes {cleave.stage = 0 : i64} {
    %t = cleave.param "rope_cos" {buffer, cleave.sharding = ["split(0, blocks=2)"]} : tensor<16x8xf32>
    %c = cleave.slice %t {cleave.sharding = ["split(0)"], dim = 0 : i64, start = 0 : i64, end = 8 : i64} : tensor<16x8xf32> -> tensor<8x8xf32>
    %g = cleave.all_gather %c {cleave.sharding = ["replicated"], group = "tp", dim = 0 : i64, blocks = 1 : i64} : tensor<8x8xf32> -> tensor<8x8xf32>
    return %g : tensor<8x8xf32>
  }
}

// -----

// A layout that does not divide the dim is an error at the op.
module attributes {cleave.mesh = {dp = 1 : i64, pp = 1 : i64, tp = 4 : i64}} {
  func.func @forward_stage0(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
    // expected-error @+1 {{result 0 of type 'tensor<4x6xf32>' cannot be laid out as split(1) over 4 ranks}}
    %r = cleave.relu %x {cleave.sharding = ["split(1)"]} : tensor<4x6xf32>
    return %r : tensor<4x6xf32>
  }
}

// -----

// expected-error @+1 {{has no cleave.mesh with a tp degree: plan the model first}}
module {
  func.func @forward(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
    return %x : tensor<4x6xf32>
  }
}
