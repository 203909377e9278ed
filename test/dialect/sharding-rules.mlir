// RUN: cleave-opt %s -mlir-disable-threading -cleave-test-sharding-rules -o /dev/null | FileCheck %s

// Each op's sharding rule (ShardingOpInterface), worked out by hand. A rule
// lists the factors of every operand dim, then of every result dim: `1` is a
// broadcast dim without factors, `i*j` a dim made of two factors (major
// first). Factors are Parallel unless marked `:reduction` (partial sums) or
// `:replicated` (must stay whole).

// Values have no operands: every dim of a weight may be split.
// CHECK-LABEL: sharding rules of @values
func.func @values() -> (tensor<96x32xf32>, tensor<f32>, tensor<2x3xi32>) {
  // CHECK-NEXT: cleave.param: () -> ([i, j]) i=96 j=32
  %w = cleave.param "qkv.weight" : tensor<96x32xf32>
  // CHECK-NEXT: cleave.constant: () -> ([])
  %s = cleave.constant dense<0.5> : tensor<f32>
  // CHECK-NEXT: cleave.constant: () -> ([i, j]) i=2 j=3
  %c = cleave.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  return %w, %s, %c : tensor<96x32xf32>, tensor<f32>, tensor<2x3xi32>
}

// Elementwise: one factor per result dim; operands align from the right, and
// an operand dim of size 1 under a larger dim has none.
// CHECK-LABEL: sharding rules of @elementwise
func.func @elementwise(%x: tensor<2x8xf32>, %b: tensor<4xi1>, %i: tensor<2x8xi64>,
                       %v: tensor<8xf32>, %col: tensor<2x1xf32>, %s: tensor<f32>,
                       %m: tensor<8x8xi1>, %t: tensor<2x8x8xf32>, %one: tensor<1x8xf32>) {
  // CHECK-NEXT: cleave.relu: ([i, j]) -> ([i, j]) i=2 j=8
  %0 = cleave.relu %x : tensor<2x8xf32>
  // CHECK-NEXT: cleave.exp: ([i, j]) -> ([i, j]) i=2 j=8
  %1 = cleave.exp %x : tensor<2x8xf32>
  // CHECK-NEXT: cleave.gelu: ([i, j]) -> ([i, j]) i=2 j=8
  %2 = cleave.gelu %x {approximation = #cleave<gelu_approximation tanh>} : tensor<2x8xf32>
  // CHECK-NEXT: cleave.cast: ([i, j]) -> ([i, j]) i=2 j=8
  %3 = cleave.cast %i : tensor<2x8xi64> to tensor<2x8xf32>
  // CHECK-NEXT: cleave.dropout: ([i, j]) -> ([i, j]) i=2 j=8
  %d = cleave.dropout %x {p = 1.000000e-01 : f64} : tensor<2x8xf32>
  // CHECK-NEXT: cleave.not: ([i]) -> ([i]) i=4
  %4 = cleave.not %b : tensor<4xi1>
  // The bias-like operand has only the trailing dim.
  // CHECK-NEXT: cleave.add: ([i, j], [j]) -> ([i, j]) i=2 j=8
  %5 = cleave.add %x, %v : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  // An outer product: each operand is read whole along the other's factor.
  // CHECK-NEXT: cleave.mul: ([i, 1], [j]) -> ([i, j]) i=2 j=8
  %6 = cleave.mul %col, %v : tensor<2x1xf32>, tensor<8xf32> -> tensor<2x8xf32>
  // CHECK-NEXT: cleave.div: ([i, j], []) -> ([i, j]) i=2 j=8
  %7 = cleave.div %x, %s : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  // Size 1 under size 1 does not broadcast: the dims share a factor of size 1.
  // CHECK-NEXT: cleave.sub: ([i, j], [i, j]) -> ([i, j]) i=1 j=8
  %8 = cleave.sub %one, %one : tensor<1x8xf32>, tensor<1x8xf32> -> tensor<1x8xf32>
  // CHECK-NEXT: cleave.compare: ([i, 1], [j]) -> ([i, j]) i=2 j=8
  %9 = cleave.compare lt, %col, %v : tensor<2x1xf32>, tensor<8xf32> -> tensor<2x8xi1>
  // Three operands: the condition misses the leading dim, the scalar all.
  // CHECK-NEXT: cleave.where: ([j, k], [], [i, j, k]) -> ([i, j, k]) i=2 j=8 k=8
  %10 = cleave.where %m, %s, %t : tensor<8x8xi1>, tensor<f32>, tensor<2x8x8xf32> -> tensor<2x8x8xf32>
  // A triangle depends on both matrix indices: only the batch dims split.
  // CHECK-NEXT: cleave.tril: ([i, j, k]) -> ([i, j, k]) i=2 j=8:replicated k=8:replicated
  %11 = cleave.tril %t {diagonal = 0 : i64} : tensor<2x8x8xf32>
  // CHECK-NEXT: cleave.triu: ([i, j]) -> ([i, j]) i=2:replicated j=8:replicated
  %12 = cleave.triu %x {diagonal = 1 : i64} : tensor<2x8xf32>
  return
}

// CHECK-LABEL: sharding rules of @layers
func.func @layers(%x: tensor<16x32xf32>, %h: tensor<2x8x32xf32>, %ids: tensor<2x8xi64>) {
  // CHECK-NEXT: cleave.param: () -> ([i, j]) i=96 j=32
  %w = cleave.param "fc.weight" : tensor<96x32xf32>
  // CHECK-NEXT: cleave.param: () -> ([i]) i=96
  %b = cleave.param "fc.bias" : tensor<96xf32>
  // CHECK-NEXT: cleave.param: () -> ([i, j]) i=512 j=32
  %table = cleave.param "wte.weight" : tensor<512x32xf32>
  // CHECK-NEXT: cleave.param: () -> ([i]) i=32
  %g = cleave.param "ln.weight" : tensor<32xf32>
  // CHECK-NEXT: cleave.param: () -> ([i]) i=32
  %beta = cleave.param "ln.bias" : tensor<32xf32>
  // Split j: column parallel (weight and bias by rows). Split k: row
  // parallel, the result a partial sum.
  // CHECK-NEXT: cleave.linear: ([i, k], [j, k], [j]) -> ([i, j]) i=16 j=96 k=32:reduction
  %0 = cleave.linear %x, %w, %b : tensor<16x32xf32>, tensor<96x32xf32>, tensor<96xf32> -> tensor<16x96xf32>
  // CHECK-NEXT: cleave.linear: ([i, j, l], [k, l]) -> ([i, j, k]) i=2 j=8 k=96 l=32:reduction
  %1 = cleave.linear %h, %w : tensor<2x8x32xf32>, tensor<96x32xf32> -> tensor<2x8x96xf32>
  // Vocab parallel: the table split by rows, lookups summed.
  // CHECK-NEXT: cleave.embedding: ([l, k], [i, j]) -> ([i, j, k]) i=2 j=8 k=32 l=512:reduction
  %2 = cleave.embedding %table, %ids : tensor<512x32xf32>, tensor<2x8xi64> -> tensor<2x8x32xf32>
  // The statistics span the normalized dims; weight and bias are those dims.
  // CHECK-NEXT: cleave.layer_norm: ([i, j, k], [k], [k]) -> ([i, j, k]) i=2 j=8 k=32:replicated
  %3 = cleave.layer_norm %h weight %g bias %beta {normalized_shape = array<i64: 32>, eps = 1.0e-05 : f64}
      : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  // CHECK-NEXT: cleave.layer_norm: ([i, j, k]) -> ([i, j, k]) i=2 j=8:replicated k=32:replicated
  %4 = cleave.layer_norm %h {normalized_shape = array<i64: 8, 32>, eps = 1.0e-05 : f64}
      : (tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  // CHECK-NEXT: cleave.softmax: ([i, j, k]) -> ([i, j, k]) i=2 j=8 k=32:replicated
  %5 = cleave.softmax %h {dim = 2 : i64} : tensor<2x8x32xf32>
  // CHECK-NEXT: cleave.log_softmax: ([i, j, k]) -> ([i, j, k]) i=2 j=8:replicated k=32
  %6 = cleave.log_softmax %h {dim = 1 : i64} : tensor<2x8x32xf32>
  return
}

// Batch dims broadcast as in elementwise ops; then m, n, and k summed over.
// CHECK-LABEL: sharding rules of @matmul
func.func @matmul(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %k3: tensor<4x16x8xf32>,
                  %q1: tensor<2x1x8x16xf32>, %a: tensor<8x16xf32>, %bm: tensor<16x4xf32>) {
  // CHECK-NEXT: cleave.matmul: ([i, j, k, m], [i, j, m, l]) -> ([i, j, k, l]) i=2 j=4 k=8 l=8 m=16:reduction
  %0 = cleave.matmul %q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  // CHECK-NEXT: cleave.matmul: ([i, 1, k, m], [j, m, l]) -> ([i, j, k, l]) i=2 j=4 k=8 l=8 m=16:reduction
  %1 = cleave.matmul %q1, %k3 : tensor<2x1x8x16xf32>, tensor<4x16x8xf32> -> tensor<2x4x8x8xf32>
  // CHECK-NEXT: cleave.matmul: ([i, k], [k, j]) -> ([i, j]) i=8 j=4 k=16:reduction
  %2 = cleave.matmul %a, %bm : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  return
}

// Sums and means combine partial results by a sum; maxima do not.
// CHECK-LABEL: sharding rules of @reductions
func.func @reductions(%x: tensor<2x8x32xf32>) {
  // CHECK-NEXT: cleave.reduce_sum: ([i, j, k]) -> ([i, j]) i=2 j=8 k=32:reduction
  %0 = cleave.reduce_sum %x {dims = array<i64: 2>} : tensor<2x8x32xf32> -> tensor<2x8xf32>
  // CHECK-NEXT: cleave.reduce_mean: ([i, j, k]) -> ([i, 1, 1]) i=2 j=8:replicated k=32:replicated
  %1 = cleave.reduce_mean %x {dims = array<i64: 1, 2>, keepdim = true} : tensor<2x8x32xf32> -> tensor<2x1x1xf32>
  // CHECK-NEXT: cleave.reduce_max: ([i, j, k]) -> ([j, k]) i=2:replicated j=8 k=32
  %2 = cleave.reduce_max %x {dims = array<i64: 0>} : tensor<2x8x32xf32> -> tensor<8x32xf32>
  return
}

// NCHW: batch and channels split, windows keep the spatial dims whole.
// CHECK-LABEL: sharding rules of @cnn
func.func @cnn(%x: tensor<2x4x8x8xf32>) {
  // CHECK-NEXT: cleave.param: () -> ([i, j, k, l]) i=6 j=4 k=3 l=3
  %w = cleave.param "conv.weight" : tensor<6x4x3x3xf32>
  // CHECK-NEXT: cleave.param: () -> ([i]) i=6
  %cb = cleave.param "conv.bias" : tensor<6xf32>
  // CHECK-NEXT: cleave.param: () -> ([i, j, k, l]) i=4 j=1 k=3 l=3
  %dw = cleave.param "dw.weight" : tensor<4x1x3x3xf32>
  // CHECK-NEXT: cleave.param: () -> ([i, j, k, l]) i=6 j=2 k=3 l=3
  %gw = cleave.param "gw.weight" : tensor<6x2x3x3xf32>
  // CHECK-NEXT: cleave.param: () -> ([i]) i=4
  %mean = cleave.param "bn.running_mean" {buffer} : tensor<4xf32>
  // CHECK-NEXT: cleave.param: () -> ([i]) i=4
  %var = cleave.param "bn.running_var" {buffer} : tensor<4xf32>
  // CHECK-NEXT: cleave.param: () -> ([i]) i=4
  %g = cleave.param "bn.weight" : tensor<4xf32>
  // CHECK-NEXT: cleave.param: () -> ([i]) i=4
  %beta = cleave.param "bn.bias" : tensor<4xf32>
  // One group: input channels j are summed over.
  // CHECK-NEXT: cleave.conv2d: ([i, j, k, l], [m, j, n, o], [m]) -> ([i, m, p, q]) i=2 j=4:reduction k=8:replicated l=8:replicated m=6 n=3:replicated o=3:replicated p=4:replicated q=4:replicated
  %0 = cleave.conv2d %x, %w, %cb {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64}
      : tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xf32> -> tensor<2x6x4x4xf32>
  // Depthwise: the input channels and the weight's depth stay whole, and the
  // outputs are groups (whole, major) x outputs per group (here 1).
  // CHECK-NEXT: cleave.conv2d: ([i, j, k, l], [m*n, o, p, q]) -> ([i, m*n, r, s]) i=2 j=4:replicated k=8:replicated l=8:replicated m=4:replicated n=1 o=1:replicated p=3:replicated q=3:replicated r=8:replicated s=8:replicated
  %1 = cleave.conv2d %x, %dw {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 4 : i64}
      : tensor<2x4x8x8xf32>, tensor<4x1x3x3xf32> -> tensor<2x4x8x8xf32>
  // Two groups of three outputs: only the outputs within each group split.
  // CHECK-NEXT: cleave.conv2d: ([i, j, k, l], [m*n, o, p, q], [m*n]) -> ([i, m*n, r, s]) i=2 j=4:replicated k=8:replicated l=8:replicated m=2:replicated n=3 o=2:replicated p=3:replicated q=3:replicated r=8:replicated s=8:replicated
  %gc = cleave.conv2d %x, %gw, %cb {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2 : i64}
      : tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32> -> tensor<2x6x8x8xf32>
  // Running statistics: a per-channel affine map, every dim splits.
  // CHECK-NEXT: cleave.batch_norm: ([i, j, k, l], [j], [j], [j], [j]) -> ([i, j, k, l]) i=2 j=4 k=8 l=8
  %2 = cleave.batch_norm %x, %mean, %var weight %g bias %beta {eps = 1.0e-05 : f64}
      : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  // CHECK-NEXT: cleave.batch_norm: ([i, j, k, l], [j], [j]) -> ([i, j, k, l]) i=2 j=4 k=8 l=8
  %3 = cleave.batch_norm %x, %mean, %var {eps = 1.0e-05 : f64}
      : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  // CHECK-NEXT: cleave.max_pool2d: ([i, j, k, l]) -> ([i, j, m, n]) i=2 j=4 k=8:replicated l=8:replicated m=4:replicated n=4:replicated
  %4 = cleave.max_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, ceil_mode = false}
      : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  // CHECK-NEXT: cleave.avg_pool2d: ([i, j, k, l]) -> ([i, j, m, n]) i=2 j=4 k=8:replicated l=8:replicated m=4:replicated n=4:replicated
  %5 = cleave.avg_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, ceil_mode = false, count_include_pad = true}
      : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  // CHECK-NEXT: cleave.adaptive_avg_pool2d: ([i, j, k, l]) -> ([i, j, m, n]) i=2 j=4 k=8:replicated l=8:replicated m=1:replicated n=1:replicated
  %6 = cleave.adaptive_avg_pool2d %x {output_size = array<i64: 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x1x1xf32>
  return
}

// A reshape is the common refinement of its two shapes.
// CHECK-LABEL: sharding rules of @reshape
func.func @reshape(%x: tensor<2x8x32xf32>, %v: tensor<6xf32>, %p: tensor<2x3xf32>,
                   %u: tensor<1x6xf32>, %r: tensor<4x6xf32>, %e: tensor<0x4xf32>) {
  // Split heads: 32 = 4 * 8.
  // CHECK-NEXT: cleave.reshape: ([i, j, k*l]) -> ([i, j, k, l]) i=2 j=8 k=4 l=8
  %0 = cleave.reshape %x : tensor<2x8x32xf32> to tensor<2x8x4x8xf32>
  // CHECK-NEXT: cleave.reshape: ([i*j]) -> ([i, j]) i=2 j=3
  %1 = cleave.reshape %v : tensor<6xf32> to tensor<2x3xf32>
  // CHECK-NEXT: cleave.reshape: ([i, j, k]) -> ([i*j*k]) i=2 j=8 k=32
  %2 = cleave.reshape %x : tensor<2x8x32xf32> to tensor<512xf32>
  // Size-1 dims have no factors.
  // CHECK-NEXT: cleave.reshape: ([1, i]) -> ([i, 1]) i=6
  %3 = cleave.reshape %u : tensor<1x6xf32> to tensor<6x1xf32>
  // 2 and 3 do not divide each other: every dim stays whole, on its own.
  // CHECK-NEXT: cleave.reshape: ([i, j]) -> ([k, l]) i=2:replicated j=3:replicated k=3:replicated l=2:replicated
  %4 = cleave.reshape %p : tensor<2x3xf32> to tensor<3x2xf32>
  // The leading 2 refines; what is left of 4 (2), 6 and 3, 4 do not.
  // CHECK-NEXT: cleave.reshape: ([i*j, k]) -> ([i, l, m]) i=2 j=2:replicated k=6:replicated l=3:replicated m=4:replicated
  %5 = cleave.reshape %r : tensor<4x6xf32> to tensor<2x3x4xf32>
  // No elements: the replicated rule.
  // CHECK-NEXT: cleave.reshape: ([i, j]) -> ([k, l]) i=0:replicated j=4:replicated k=4:replicated l=0:replicated
  %6 = cleave.reshape %e : tensor<0x4xf32> to tensor<4x0xf32>
  return
}

// CHECK-LABEL: sharding rules of @movement
func.func @movement(%x: tensor<2x8x32xf32>, %h: tensor<2x8x4x8xf32>, %cls: tensor<1x1x64xf32>,
                    %y: tensor<8xf32>, %a: tensor<4x1x64xf32>, %t: tensor<4x16x64xf32>) {
  // CHECK-NEXT: cleave.permute: ([i, j, k, l]) -> ([i, k, j, l]) i=2 j=8 k=4 l=8
  %0 = cleave.permute %h {dims = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
  // A stretched or added dim is a factor of the result only.
  // CHECK-NEXT: cleave.broadcast_to: ([1, j, k]) -> ([i, j, k]) i=4 j=1 k=64
  %1 = cleave.broadcast_to %cls : tensor<1x1x64xf32> to tensor<4x1x64xf32>
  // CHECK-NEXT: cleave.broadcast_to: ([j]) -> ([i, j]) i=2 j=8
  %2 = cleave.broadcast_to %y : tensor<8xf32> to tensor<2x8xf32>
  // Block 1 of 4 blocks of 8: the cut dim is 4 blocks times 8.
  // CHECK-NEXT: cleave.slice: ([i, j, k*l]) -> ([i, j, l]) i=2 j=8 k=4:replicated l=8
  %3 = cleave.slice %x {dim = 2 : i64, start = 8 : i64, end = 16 : i64} : tensor<2x8x32xf32> -> tensor<2x8x8xf32>
  // Not aligned to a block: the cut dim stays whole on both sides.
  // CHECK-NEXT: cleave.slice: ([i, j, k]) -> ([i, j, l]) i=2 j=8 k=32:replicated l=8:replicated
  %4 = cleave.slice %x {dim = 2 : i64, start = 4 : i64, end = 12 : i64} : tensor<2x8x32xf32> -> tensor<2x8x8xf32>
  // A step other than 1 is no block.
  // CHECK-NEXT: cleave.slice: ([i, j, l]) -> ([i, k, l]) i=2 j=8:replicated k=4:replicated l=32
  %5 = cleave.slice %x {dim = 1 : i64, start = 0 : i64, end = 8 : i64, step = 2 : i64} : tensor<2x8x32xf32> -> tensor<2x4x32xf32>
  // The whole dim: one block, nothing to keep whole.
  // CHECK-NEXT: cleave.slice: ([i, j, k]) -> ([i, j, k]) i=2 j=8 k=32
  %6 = cleave.slice %x {dim = 1 : i64, start = 0 : i64, end = 8 : i64} : tensor<2x8x32xf32> -> tensor<2x8x32xf32>
  // One element (a select): nothing to split along the cut.
  // CHECK-NEXT: cleave.slice: ([i, j, l]) -> ([i, k, l]) i=2 j=8:replicated k=1:replicated l=32
  %7 = cleave.slice %x {dim = 1 : i64, start = 3 : i64, end = 4 : i64} : tensor<2x8x32xf32> -> tensor<2x1x32xf32>
  // CHECK-NEXT: cleave.concat: ([i, j, m], [i, k, m]) -> ([i, l, m]) i=4 j=1:replicated k=16:replicated l=17:replicated m=64
  %8 = cleave.concat %a, %t {dim = 1 : i64} : (tensor<4x1x64xf32>, tensor<4x16x64xf32>) -> tensor<4x17x64xf32>
  return
}

// A fused QKV projection (GPT-2's c_attn) cut into q, k, v: the slice views
// the 96 outputs as 3 blocks of 32 (k*l) and keeps one; split on its minor
// factor l, each rank holds its part of each of q, k and v (Megatron's
// split). The reshape refines those 32 into 4 heads of 8 and the permute
// moves them: a split of the heads stays local through all three.
// CHECK-LABEL: sharding rules of @fused_qkv
func.func @fused_qkv(%x: tensor<2x8x32xf32>) -> tensor<2x4x8x8xf32> {
  // CHECK-NEXT: cleave.param: () -> ([i, j]) i=96 j=32
  %w = cleave.param "attn.qkv.weight" : tensor<96x32xf32>
  // CHECK-NEXT: cleave.linear: ([i, j, l], [k, l]) -> ([i, j, k]) i=2 j=8 k=96 l=32:reduction
  %qkv = cleave.linear %x, %w : tensor<2x8x32xf32>, tensor<96x32xf32> -> tensor<2x8x96xf32>
  // CHECK-NEXT: cleave.slice: ([i, j, k*l]) -> ([i, j, l]) i=2 j=8 k=3:replicated l=32
  %k = cleave.slice %qkv {dim = 2 : i64, start = 32 : i64, end = 64 : i64, step = 1 : i64} : tensor<2x8x96xf32> -> tensor<2x8x32xf32>
  // CHECK-NEXT: cleave.reshape: ([i, j, k*l]) -> ([i, j, k, l]) i=2 j=8 k=4 l=8
  %heads = cleave.reshape %k : tensor<2x8x32xf32> to tensor<2x8x4x8xf32>
  // CHECK-NEXT: cleave.permute: ([i, j, k, l]) -> ([i, k, j, l]) i=2 j=8 k=4 l=8
  %t = cleave.permute %heads {dims = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
  return %t : tensor<2x4x8x8xf32>
}

// Fused attention: batch and heads split with no collective (each rank its
// own heads, as tp does); queries, keys and head dims stay whole.
// CHECK-LABEL: sharding rules of @attention
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x10x16xf32>, %v: tensor<2x4x10x32xf32>) -> tensor<2x4x8x32xf32> {
  // CHECK-NEXT: cleave.attention: ([i, j, k, l], [i, j, m, l], [i, j, m, n]) -> ([i, j, k, n]) i=2 j=4 k=8:replicated l=16:replicated m=10:replicated n=32:replicated
  %y = cleave.attention %q, %k, %v {causal = false, scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32>
  return %y : tensor<2x4x8x32xf32>
}

// Factors past z are named by their number in the alphabet's order: f26, ….
// CHECK-LABEL: sharding rules of @many_factors
func.func @many_factors(%a: tensor<1xf32>) -> tensor<18xf32> {
  // CHECK-NEXT: cleave.concat: ([i], [j], [k], [l], [m], [n], [o], [p], [q], [r], [s], [t], [u], [v], [w], [x], [y], [z]) -> ([f26]) i=1:replicated j=1:replicated k=1:replicated l=1:replicated m=1:replicated n=1:replicated o=1:replicated p=1:replicated q=1:replicated r=1:replicated s=1:replicated t=1:replicated u=1:replicated v=1:replicated w=1:replicated x=1:replicated y=1:replicated z=1:replicated f26=18:replicated
  %0 = cleave.concat %a, %a, %a, %a, %a, %a, %a, %a, %a, %a, %a, %a, %a, %a, %a, %a, %a, %a {dim = 0 : i64}
      : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>,
         tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>,
         tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<18xf32>
  // CHECK-NOT: cleave
  return %0 : tensor<18xf32>
}
