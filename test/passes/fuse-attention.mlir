// RUN: cleave-opt %s -split-input-file -cleave-fuse-attention | FileCheck %s

// nanoGPT's attention as the importer writes it: k^T by a permute, a scale
// after the product, the tril buffer sliced to the sequence, `== 0` filled
// with -inf, softmax over the keys, dropout, the product with v. Here the
// buffer is a constant (cleave-opt has no buffer data). The mask's
// computation is erased with the chain.
// CHECK-LABEL: func.func @gpt_causal(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<1x2x4x8xf32>, %[[K:[^:]+]]: tensor<1x2x4x8xf32>, %[[V:[^:]+]]: tensor<1x2x4x8xf32>
// CHECK-NEXT: %[[Y:.+]] = cleave.attention %[[Q]], %[[K]], %[[V]] {causal = true, scale = 0.35355338454246521 : f64} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gpt_causal(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %buffer = cleave.constant dense<[[[[1.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]]]> : tensor<1x1x6x6xf32>
  %kt = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = cleave.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %c = cleave.constant dense<0.353553385> : tensor<f32>
  %scaled = cleave.mul %s, %c : tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %rows = cleave.slice %buffer {dim = 2 : i64, end = 4 : i64, start = 0 : i64} : tensor<1x1x6x6xf32> -> tensor<1x1x4x6xf32>
  %mask = cleave.slice %rows {dim = 3 : i64, end = 4 : i64, start = 0 : i64} : tensor<1x1x4x6xf32> -> tensor<1x1x4x4xf32>
  %zero = cleave.constant dense<0.0> : tensor<f32>
  %hidden = cleave.compare eq, %mask, %zero : tensor<1x1x4x4xf32>, tensor<f32> -> tensor<1x1x4x4xi1>
  %ninf = cleave.constant dense<0xFF800000> : tensor<f32>
  %masked = cleave.where %hidden, %ninf, %scaled : tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %p = cleave.softmax %masked {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %pd = cleave.dropout %p {p = 1.000000e-01 : f64} : tensor<1x2x4x4xf32>
  %y = cleave.matmul %pd, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// LLaMA's: a division by sqrt(head_dim), the mask made in forward by
// torch.tril(torch.ones(T, T)) == 0 (folded to an i1 constant for short
// sequences, kept as tril of a splat for long ones), v with another head dim.
// CHECK-LABEL: func.func @llama_causal(
// CHECK: cleave.attention %{{.+}}, %{{.+}}, %{{.+}} {causal = true, scale = 5.000000e-01 : f64} : tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x6xf32> -> tensor<2x2x3x6xf32>
// CHECK: cleave.attention %{{.+}}, %{{.+}}, %{{.+}} {causal = true, scale = 5.000000e-01 : f64}
// CHECK-NOT: cleave.tril
// CHECK-NOT: cleave.softmax
// CHECK-NOT: cleave.where
func.func @llama_causal(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x6xf32>) -> (tensor<2x2x3x6xf32>, tensor<2x2x3x6xf32>) {
  %two = cleave.constant dense<2.0> : tensor<f32>
  %ninf = cleave.constant dense<0xFF800000> : tensor<f32>
  %folded = cleave.constant dense<[[false, true, true], [false, false, true], [false, false, false]]> : tensor<3x3xi1>
  %kt = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<2x2x3x4xf32> -> tensor<2x2x4x3xf32>
  %s = cleave.matmul %q, %kt : tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32> -> tensor<2x2x3x3xf32>
  %d = cleave.div %s, %two : tensor<2x2x3x3xf32>, tensor<f32> -> tensor<2x2x3x3xf32>
  %m = cleave.where %folded, %ninf, %d : tensor<3x3xi1>, tensor<f32>, tensor<2x2x3x3xf32> -> tensor<2x2x3x3xf32>
  %p = cleave.softmax %m {dim = 3 : i64} : tensor<2x2x3x3xf32>
  %y = cleave.matmul %p, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x6xf32> -> tensor<2x2x3x6xf32>
  // The unfolded form: tril(ones) == 0.
  %ones = cleave.constant dense<1.0> : tensor<3x3xf32>
  %tril = cleave.tril %ones : tensor<3x3xf32>
  %zero = cleave.constant dense<0.0> : tensor<f32>
  %hidden = cleave.compare eq, %tril, %zero : tensor<3x3xf32>, tensor<f32> -> tensor<3x3xi1>
  %kt2 = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<2x2x3x4xf32> -> tensor<2x2x4x3xf32>
  %s2 = cleave.matmul %q, %kt2 : tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32> -> tensor<2x2x3x3xf32>
  %d2 = cleave.div %s2, %two : tensor<2x2x3x3xf32>, tensor<f32> -> tensor<2x2x3x3xf32>
  %m2 = cleave.where %hidden, %ninf, %d2 : tensor<3x3xi1>, tensor<f32>, tensor<2x2x3x3xf32> -> tensor<2x2x3x3xf32>
  %p2 = cleave.softmax %m2 {dim = 3 : i64} : tensor<2x2x3x3xf32>
  %y2 = cleave.matmul %p2, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x6xf32> -> tensor<2x2x3x6xf32>
  return %y, %y2 : tensor<2x2x3x6xf32>, tensor<2x2x3x6xf32>
}

// -----

// Fewer queries than keys: the causal pattern is the bottom-right triangle
// (tril with diagonal Sk - Sq), the keys a cache would hold before the
// queries. The kept side named by the condition (where(keep, s, -inf))
// works too.
// CHECK-LABEL: func.func @bottom_right(
// CHECK: cleave.attention %{{.+}}, %{{.+}}, %{{.+}} {causal = true, scale = 1.000000e+00 : f64} : tensor<1x1x2x4xf32>, tensor<1x1x5x4xf32>, tensor<1x1x5x4xf32> -> tensor<1x1x2x4xf32>
func.func @bottom_right(%q: tensor<1x1x2x4xf32>, %k: tensor<1x1x5x4xf32>, %v: tensor<1x1x5x4xf32>) -> tensor<1x1x2x4xf32> {
  %ones = cleave.constant dense<true> : tensor<2x5xi1>
  %keep = cleave.tril %ones {diagonal = 3 : i64} : tensor<2x5xi1>
  %ninf = cleave.constant dense<0xFF800000> : tensor<f32>
  %kt = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<1x1x5x4xf32> -> tensor<1x1x4x5xf32>
  %s = cleave.matmul %q, %kt : tensor<1x1x2x4xf32>, tensor<1x1x4x5xf32> -> tensor<1x1x2x5xf32>
  %m = cleave.where %keep, %s, %ninf : tensor<2x5xi1>, tensor<1x1x2x5xf32>, tensor<f32> -> tensor<1x1x2x5xf32>
  %p = cleave.softmax %m {dim = 3 : i64} : tensor<1x1x2x5xf32>
  %y = cleave.matmul %p, %v : tensor<1x1x2x5xf32>, tensor<1x1x5x4xf32> -> tensor<1x1x2x4xf32>
  return %y : tensor<1x1x2x4xf32>
}

// -----

// The mask built in forward the common way (HF GPT-2): a bool
// ones(T, T).tril() keeps scores, the rest take torch.finfo(f32).min, which
// the softmax turns into exactly 0 as it does -inf. So does -1e9.
// CHECK-LABEL: func.func @lowest_fill(
// CHECK-COUNT-2: cleave.attention %{{.+}}, %{{.+}}, %{{.+}} {causal = true, scale = 1.000000e+00 : f64}
// CHECK-NOT: cleave.softmax
func.func @lowest_fill(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>)
    -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) {
  %ones = cleave.constant dense<true> : tensor<4x4xi1>
  %causal = cleave.tril %ones : tensor<4x4xi1>
  %lowest = cleave.constant dense<0xFF7FFFFF> : tensor<f32>
  %kt = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = cleave.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %m = cleave.where %causal, %s, %lowest : tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %p = cleave.softmax %m {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %y = cleave.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  %minus = cleave.constant dense<-1.0e9> : tensor<f32>
  %kt2 = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s2 = cleave.matmul %q, %kt2 : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %m2 = cleave.where %causal, %s2, %minus : tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %p2 = cleave.softmax %m2 {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %y2 = cleave.matmul %p2, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %y, %y2 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
}

// -----

// ViT (timm): no mask, a multiplication by head_dim^-0.5, dropout.
// CHECK-LABEL: func.func @vit(
// CHECK: cleave.attention %{{.+}}, %{{.+}}, %{{.+}} {causal = false, scale = 0.35355338454246521 : f64}
// CHECK-NOT: cleave.softmax
func.func @vit(%q: tensor<2x4x17x8xf32>, %k: tensor<2x4x17x8xf32>, %v: tensor<2x4x17x8xf32>) -> tensor<2x4x17x8xf32> {
  %kt = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<2x4x17x8xf32> -> tensor<2x4x8x17xf32>
  %s = cleave.matmul %q, %kt : tensor<2x4x17x8xf32>, tensor<2x4x8x17xf32> -> tensor<2x4x17x17xf32>
  %c = cleave.constant dense<0.353553385> : tensor<f32>
  %scaled = cleave.mul %c, %s : tensor<f32>, tensor<2x4x17x17xf32> -> tensor<2x4x17x17xf32>
  %p = cleave.softmax %scaled {dim = 3 : i64} : tensor<2x4x17x17xf32>
  %pd = cleave.dropout %p {p = 1.000000e-01 : f64} : tensor<2x4x17x17xf32>
  %y = cleave.matmul %pd, %v : tensor<2x4x17x17xf32>, tensor<2x4x17x8xf32> -> tensor<2x4x17x8xf32>
  return %y : tensor<2x4x17x8xf32>
}

// -----

// BERT without an attention mask: a division. A scale on q before the
// product folds in too, and a k^T that is no permute (an argument here)
// gets one.
// CHECK-LABEL: func.func @bert(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<2x4x8x8xf32>, %[[KT:[^:]+]]: tensor<2x4x8x8xf32>, %[[V:[^:]+]]: tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[K:.+]] = cleave.permute %[[KT]] {dims = array<i64: 0, 1, 3, 2>}
// CHECK-NEXT: cleave.attention %[[Q]], %[[K]], %[[V]] {causal = false, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return
func.func @bert(%q: tensor<2x4x8x8xf32>, %kt: tensor<2x4x8x8xf32>, %v: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %half = cleave.constant dense<0.5> : tensor<f32>
  %two = cleave.constant dense<2.0> : tensor<f32>
  %qs = cleave.mul %q, %half : tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %s = cleave.matmul %qs, %kt : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %d = cleave.div %s, %two : tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %p = cleave.softmax %d {dim = 3 : i64} : tensor<2x4x8x8xf32>
  %y = cleave.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  return %y : tensor<2x4x8x8xf32>
}

// -----

// Not fused: the scaled scores have a second user.
// CHECK-LABEL: func.func @scores_used_twice(
// CHECK-NOT: cleave.attention
// CHECK: cleave.softmax
func.func @scores_used_twice(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %kt = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = cleave.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %c = cleave.constant dense<0.5> : tensor<f32>
  %scaled = cleave.mul %s, %c : tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %p = cleave.softmax %scaled {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %y = cleave.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %y, %scaled : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}

// -----

// Not fused: the probabilities are returned too (attention weights kept).
// CHECK-LABEL: func.func @probabilities_used_twice(
// CHECK-NOT: cleave.attention
// CHECK: cleave.softmax
func.func @probabilities_used_twice(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %kt = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = cleave.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %p = cleave.softmax %s {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %pd = cleave.dropout %p {p = 1.000000e-01 : f64} : tensor<1x2x4x4xf32>
  %y = cleave.matmul %pd, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %y, %pd : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}

// -----

// Not fused: masks that are not the causal pattern. A tril one diagonal
// too far (the diagonal hidden), the top-left triangle when queries and keys
// differ in number, a padding-style mask from an input (unknown at compile
// time), a fill neither -inf nor low enough to vanish in the softmax
// (BERT's -10000), and a finite fill with more queries than keys (the first
// query hides every key: uniform weights, where -inf gives NaN).
// CHECK-LABEL: func.func @not_causal(
// CHECK-NOT: cleave.attention
// CHECK-COUNT-5: cleave.softmax
// CHECK-NOT: cleave.attention
func.func @not_causal(%q: tensor<1x1x3x4xf32>, %k: tensor<1x1x3x4xf32>, %v: tensor<1x1x3x4xf32>,
                      %q2: tensor<1x1x2x4xf32>, %k5: tensor<1x1x5x4xf32>, %pad: tensor<1x1x1x3xi1>)
    -> (tensor<1x1x3x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>) {
  %ninf = cleave.constant dense<0xFF800000> : tensor<f32>
  %ones = cleave.constant dense<1.0> : tensor<3x3xf32>
  %zero = cleave.constant dense<0.0> : tensor<f32>
  %strict = cleave.tril %ones {diagonal = -1 : i64} : tensor<3x3xf32>
  %hidden = cleave.compare eq, %strict, %zero : tensor<3x3xf32>, tensor<f32> -> tensor<3x3xi1>
  %kt = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<1x1x3x4xf32> -> tensor<1x1x4x3xf32>
  %s = cleave.matmul %q, %kt : tensor<1x1x3x4xf32>, tensor<1x1x4x3xf32> -> tensor<1x1x3x3xf32>
  %m = cleave.where %hidden, %ninf, %s : tensor<3x3xi1>, tensor<f32>, tensor<1x1x3x3xf32> -> tensor<1x1x3x3xf32>
  %p = cleave.softmax %m {dim = 3 : i64} : tensor<1x1x3x3xf32>
  %y = cleave.matmul %p, %v : tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32> -> tensor<1x1x3x4xf32>

  %wide = cleave.constant dense<true> : tensor<2x5xi1>
  %topleft = cleave.tril %wide : tensor<2x5xi1>
  %kt5 = cleave.permute %k5 {dims = array<i64: 0, 1, 3, 2>} : tensor<1x1x5x4xf32> -> tensor<1x1x4x5xf32>
  %s2 = cleave.matmul %q2, %kt5 : tensor<1x1x2x4xf32>, tensor<1x1x4x5xf32> -> tensor<1x1x2x5xf32>
  %m2 = cleave.where %topleft, %s2, %ninf : tensor<2x5xi1>, tensor<1x1x2x5xf32>, tensor<f32> -> tensor<1x1x2x5xf32>
  %p2 = cleave.softmax %m2 {dim = 3 : i64} : tensor<1x1x2x5xf32>
  %y2 = cleave.matmul %p2, %k5 : tensor<1x1x2x5xf32>, tensor<1x1x5x4xf32> -> tensor<1x1x2x4xf32>

  %kt3 = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<1x1x3x4xf32> -> tensor<1x1x4x3xf32>
  %s3 = cleave.matmul %q, %kt3 : tensor<1x1x3x4xf32>, tensor<1x1x4x3xf32> -> tensor<1x1x3x3xf32>
  %m3 = cleave.where %pad, %ninf, %s3 : tensor<1x1x1x3xi1>, tensor<f32>, tensor<1x1x3x3xf32> -> tensor<1x1x3x3xf32>
  %p3 = cleave.softmax %m3 {dim = 3 : i64} : tensor<1x1x3x3xf32>
  %y3 = cleave.matmul %p3, %v : tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32> -> tensor<1x1x3x4xf32>

  %causal = cleave.tril %ones : tensor<3x3xf32>
  %hidden4 = cleave.compare eq, %causal, %zero : tensor<3x3xf32>, tensor<f32> -> tensor<3x3xi1>
  %big = cleave.constant dense<-1.0e4> : tensor<f32>
  %kt4 = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<1x1x3x4xf32> -> tensor<1x1x4x3xf32>
  %s4 = cleave.matmul %q, %kt4 : tensor<1x1x3x4xf32>, tensor<1x1x4x3xf32> -> tensor<1x1x3x3xf32>
  %m4 = cleave.where %hidden4, %big, %s4 : tensor<3x3xi1>, tensor<f32>, tensor<1x1x3x3xf32> -> tensor<1x1x3x3xf32>
  %p4 = cleave.softmax %m4 {dim = 3 : i64} : tensor<1x1x3x3xf32>
  %y4 = cleave.matmul %p4, %v : tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32> -> tensor<1x1x3x4xf32>

  %tall = cleave.constant dense<true> : tensor<3x2xi1>
  %keep5 = cleave.tril %tall {diagonal = -1 : i64} : tensor<3x2xi1>
  %lowest = cleave.constant dense<0xFF7FFFFF> : tensor<f32>
  %k2 = cleave.slice %k {dim = 2 : i64, start = 0 : i64, end = 2 : i64} : tensor<1x1x3x4xf32> -> tensor<1x1x2x4xf32>
  %kt6 = cleave.permute %k2 {dims = array<i64: 0, 1, 3, 2>} : tensor<1x1x2x4xf32> -> tensor<1x1x4x2xf32>
  %s5 = cleave.matmul %q, %kt6 : tensor<1x1x3x4xf32>, tensor<1x1x4x2xf32> -> tensor<1x1x3x2xf32>
  %m5 = cleave.where %keep5, %s5, %lowest : tensor<3x2xi1>, tensor<1x1x3x2xf32>, tensor<f32> -> tensor<1x1x3x2xf32>
  %p5 = cleave.softmax %m5 {dim = 3 : i64} : tensor<1x1x3x2xf32>
  %v2 = cleave.slice %v {dim = 2 : i64, start = 0 : i64, end = 2 : i64} : tensor<1x1x3x4xf32> -> tensor<1x1x2x4xf32>
  %y5 = cleave.matmul %p5, %v2 : tensor<1x1x3x2xf32>, tensor<1x1x2x4xf32> -> tensor<1x1x3x4xf32>
  return %y, %y2, %y3, %y4, %y5 : tensor<1x1x3x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>
}

// -----

// Not fused: the softmax runs over the queries (dim 2), and a scale that is
// not a constant.
// CHECK-LABEL: func.func @other_softmax_dim(
// CHECK-NOT: cleave.attention
// CHECK-COUNT-2: cleave.softmax
// CHECK-NOT: cleave.attention
func.func @other_softmax_dim(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %t: tensor<f32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) {
  %kt = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = cleave.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %p = cleave.softmax %s {dim = 2 : i64} : tensor<1x2x4x4xf32>
  %y = cleave.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  %kt2 = cleave.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s2 = cleave.matmul %q, %kt2 : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %scaled = cleave.mul %s2, %t : tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %p2 = cleave.softmax %scaled {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %y2 = cleave.matmul %p2, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %y, %y2 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
}
