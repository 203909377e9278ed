// RUN: cleave-opt %s | cleave-opt | FileCheck %s
// RUN: cleave-opt %s --mlir-print-op-generic | cleave-opt | FileCheck %s

// Round-trip of every cleave op: the custom form is printed, re-parsed and
// checked, and so is the generic form. Result types are written out in full;
// the ops with inferred result types reject them unless inference agrees, so
// each type below also tests the inference rule of its op.

// CHECK-LABEL: func.func @values(
func.func @values() -> (tensor<4x8xf32>, tensor<16xi64>) {
  // Params with and without {buffer}, constants of every element type, splat and not.
  // CHECK-NEXT: %[[R0:[^ ]+]] = cleave.param "blocks.0.mlp.fc.weight" : tensor<4x8xf32>
  %0 = cleave.param "blocks.0.mlp.fc.weight" : tensor<4x8xf32>
  // CHECK-NEXT: %[[R1:[^ ]+]] = cleave.param "blocks.0.attn.mask" {buffer} : tensor<16xi64>
  %1 = cleave.param "blocks.0.attn.mask" {buffer} : tensor<16xi64>
  // CHECK-NEXT: %{{.+}} = cleave.param "ln.weight" : tensor<3xbf16>
  %2 = cleave.param "ln.weight" : tensor<3xbf16>
  // CHECK-NEXT: %{{.+}} = cleave.constant dense<5.000000e-01> : tensor<f32>
  %3 = cleave.constant dense<0.5> : tensor<f32>
  // CHECK-NEXT: %{{.+}} = cleave.constant dense<{{\[\[}}1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %4 = cleave.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  // CHECK-NEXT: %{{.+}} = cleave.constant dense<true> : tensor<2x2xi1>
  %5 = cleave.constant dense<true> : tensor<2x2xi1>
  // CHECK-NEXT: %{{.+}} = cleave.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xbf16>
  %6 = cleave.constant dense<[1.0, 2.0, 3.0]> : tensor<3xbf16>
  // CHECK-NEXT: %{{.+}} = cleave.constant dense<1.500000e+00> : tensor<3x4xf16>
  %7 = cleave.constant dense<1.5> : tensor<3x4xf16>
  // CHECK-NEXT: %{{.+}} = cleave.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %8 = cleave.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  // CHECK-NEXT: %{{.+}} = cleave.constant dense<0xFF800000> : tensor<f32>
  %9 = cleave.constant dense<0xFF800000> : tensor<f32>
  // CHECK-NEXT: return %[[R0]], %[[R1]] : tensor<4x8xf32>, tensor<16xi64>
  return %0, %1 : tensor<4x8xf32>, tensor<16xi64>
}

// CHECK-LABEL: func.func @unary(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xf32>, %[[I:[^:]+]]: tensor<3xi64>, %[[B:[^:]+]]: tensor<4xi1>, %[[H:[^:]+]]: tensor<5xbf16>)
func.func @unary(%x: tensor<2x8xf32>, %i: tensor<3xi64>, %b: tensor<4xi1>, %h: tensor<5xbf16>) {
  // neg/abs/relu take any element type, the others floats only, not takes i1.
  // CHECK-NEXT: %{{.+}} = cleave.neg %[[X]] : tensor<2x8xf32>
  %0 = cleave.neg %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.neg %[[I]] : tensor<3xi64>
  %1 = cleave.neg %i : tensor<3xi64>
  // CHECK-NEXT: %{{.+}} = cleave.abs %[[X]] : tensor<2x8xf32>
  %2 = cleave.abs %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.abs %[[I]] : tensor<3xi64>
  %3 = cleave.abs %i : tensor<3xi64>
  // CHECK-NEXT: %{{.+}} = cleave.relu %[[X]] : tensor<2x8xf32>
  %4 = cleave.relu %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.relu %[[I]] : tensor<3xi64>
  %5 = cleave.relu %i : tensor<3xi64>
  // CHECK-NEXT: %{{.+}} = cleave.silu %[[X]] : tensor<2x8xf32>
  %6 = cleave.silu %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.sigmoid %[[X]] : tensor<2x8xf32>
  %7 = cleave.sigmoid %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.tanh %[[X]] : tensor<2x8xf32>
  %8 = cleave.tanh %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.exp %[[X]] : tensor<2x8xf32>
  %9 = cleave.exp %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.log %[[X]] : tensor<2x8xf32>
  %10 = cleave.log %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.sqrt %[[X]] : tensor<2x8xf32>
  %11 = cleave.sqrt %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.rsqrt %[[H]] : tensor<5xbf16>
  %12 = cleave.rsqrt %h : tensor<5xbf16>
  // CHECK-NEXT: %{{.+}} = cleave.sin %[[X]] : tensor<2x8xf32>
  %13 = cleave.sin %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.cos %[[X]] : tensor<2x8xf32>
  %14 = cleave.cos %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.erf %[[X]] : tensor<2x8xf32>
  %15 = cleave.erf %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.not %[[B]] : tensor<4xi1>
  %16 = cleave.not %b : tensor<4xi1>
  // approximation = none is the default and is elided when printed.
  // CHECK-NEXT: %{{.+}} = cleave.gelu %[[X]] : tensor<2x8xf32>
  %17 = cleave.gelu %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.gelu %[[X]] : tensor<2x8xf32>
  %18 = cleave.gelu %x {approximation = #cleave<gelu_approximation none>} : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.gelu %[[H]] {approximation = #cleave<gelu_approximation tanh>} : tensor<5xbf16>
  %19 = cleave.gelu %h {approximation = #cleave<gelu_approximation tanh>} : tensor<5xbf16>
  // CHECK-NEXT: %{{.+}} = cleave.dropout %[[X]] {p = 1.000000e-01 : f64} : tensor<2x8xf32>
  %20 = cleave.dropout %x {p = 1.000000e-01 : f64} : tensor<2x8xf32>
  return
}

// CHECK-LABEL: func.func @unary_math(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xf32>, %[[I:[^:]+]]: tensor<3xi64>, %[[B:[^:]+]]: tensor<4xi1>, %[[H:[^:]+]]: tensor<5xbf16>)
func.func @unary_math(%x: tensor<2x8xf32>, %i: tensor<3xi64>, %b: tensor<4xi1>, %h: tensor<5xbf16>) {
  // Rounding takes integers (which round to themselves) and keeps the type.
  // CHECK-NEXT: %{{.+}} = cleave.floor %[[X]] : tensor<2x8xf32>
  %0 = cleave.floor %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.ceil %[[I]] : tensor<3xi64>
  %1 = cleave.ceil %i : tensor<3xi64>
  // CHECK-NEXT: %{{.+}} = cleave.round %[[H]] : tensor<5xbf16>
  %2 = cleave.round %h : tensor<5xbf16>
  // CHECK-NEXT: %{{.+}} = cleave.trunc %[[X]] : tensor<2x8xf32>
  %3 = cleave.trunc %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.sign %[[I]] : tensor<3xi64>
  %4 = cleave.sign %i : tensor<3xi64>
  // CHECK-NEXT: %{{.+}} = cleave.sign %[[B]] : tensor<4xi1>
  %5 = cleave.sign %b : tensor<4xi1>
  // CHECK-NEXT: %{{.+}} = cleave.log1p %[[X]] : tensor<2x8xf32>
  %6 = cleave.log1p %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.expm1 %[[X]] : tensor<2x8xf32>
  %7 = cleave.expm1 %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.tan %[[X]] : tensor<2x8xf32>
  %8 = cleave.tan %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.asin %[[X]] : tensor<2x8xf32>
  %9 = cleave.asin %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.acos %[[X]] : tensor<2x8xf32>
  %10 = cleave.acos %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.atan %[[H]] : tensor<5xbf16>
  %11 = cleave.atan %h : tensor<5xbf16>
  // CHECK-NEXT: %{{.+}} = cleave.sinh %[[X]] : tensor<2x8xf32>
  %12 = cleave.sinh %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.cosh %[[X]] : tensor<2x8xf32>
  %13 = cleave.cosh %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.asinh %[[X]] : tensor<2x8xf32>
  %14 = cleave.asinh %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.acosh %[[X]] : tensor<2x8xf32>
  %15 = cleave.acosh %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.atanh %[[X]] : tensor<2x8xf32>
  %16 = cleave.atanh %x : tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.reciprocal %[[X]] : tensor<2x8xf32>
  %17 = cleave.reciprocal %x : tensor<2x8xf32>
  return
}

// CHECK-LABEL: func.func @binary(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<2x8xf32>, %[[V:[^:]+]]: tensor<8xf32>, %[[S:[^:]+]]: tensor<f32>, %[[C:[^:]+]]: tensor<4x1x8xf32>, %[[D:[^:]+]]: tensor<3x1xf32>, %[[I:[^:]+]]: tensor<2x1xi64>, %[[J:[^:]+]]: tensor<5xi64>, %[[P:[^:]+]]: tensor<2x1xi1>, %[[Q:[^:]+]]: tensor<1x3xi1>)
func.func @binary(%a: tensor<2x8xf32>, %v: tensor<8xf32>, %s: tensor<f32>, %c: tensor<4x1x8xf32>, %d: tensor<3x1xf32>, %i: tensor<2x1xi64>, %j: tensor<5xi64>, %p: tensor<2x1xi1>, %q: tensor<1x3xi1>) {
  // CHECK-NEXT: %{{.+}} = cleave.add %[[A]], %[[V]] : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %0 = cleave.add %a, %v : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  // [4, 1, 8] with [3, 1]: trailing dims align, size-1 dims stretch.
  // CHECK-NEXT: %{{.+}} = cleave.add %[[C]], %[[D]] : tensor<4x1x8xf32>, tensor<3x1xf32> -> tensor<4x3x8xf32>
  %1 = cleave.add %c, %d : tensor<4x1x8xf32>, tensor<3x1xf32> -> tensor<4x3x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.sub %[[S]], %[[A]] : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %2 = cleave.sub %s, %a : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.sub %[[I]], %[[J]] : tensor<2x1xi64>, tensor<5xi64> -> tensor<2x5xi64>
  %3 = cleave.sub %i, %j : tensor<2x1xi64>, tensor<5xi64> -> tensor<2x5xi64>
  // CHECK-NEXT: %{{.+}} = cleave.mul %[[A]], %[[S]] : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %4 = cleave.mul %a, %s : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.div %[[A]], %[[A]] : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %5 = cleave.div %a, %a : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.div %[[I]], %[[I]] : tensor<2x1xi64>, tensor<2x1xi64> -> tensor<2x1xi64>
  %6 = cleave.div %i, %i : tensor<2x1xi64>, tensor<2x1xi64> -> tensor<2x1xi64>
  // CHECK-NEXT: %{{.+}} = cleave.pow %[[A]], %[[S]] : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %7 = cleave.pow %a, %s : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.maximum %[[C]], %[[A]] : tensor<4x1x8xf32>, tensor<2x8xf32> -> tensor<4x2x8xf32>
  %8 = cleave.maximum %c, %a : tensor<4x1x8xf32>, tensor<2x8xf32> -> tensor<4x2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.minimum %[[S]], %[[S]] : tensor<f32>, tensor<f32> -> tensor<f32>
  %9 = cleave.minimum %s, %s : tensor<f32>, tensor<f32> -> tensor<f32>
  // CHECK-NEXT: %{{.+}} = cleave.and %[[P]], %[[Q]] : tensor<2x1xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  %10 = cleave.and %p, %q : tensor<2x1xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  // CHECK-NEXT: %{{.+}} = cleave.or %[[Q]], %[[P]] : tensor<1x3xi1>, tensor<2x1xi1> -> tensor<2x3xi1>
  %11 = cleave.or %q, %p : tensor<1x3xi1>, tensor<2x1xi1> -> tensor<2x3xi1>
  // Bitwise on integers.
  // CHECK-NEXT: %{{.+}} = cleave.and %[[I]], %[[I]] : tensor<2x1xi64>, tensor<2x1xi64> -> tensor<2x1xi64>
  %12 = cleave.and %i, %i : tensor<2x1xi64>, tensor<2x1xi64> -> tensor<2x1xi64>
  // CHECK-NEXT: %{{.+}} = cleave.xor %[[P]], %[[Q]] : tensor<2x1xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  %13 = cleave.xor %p, %q : tensor<2x1xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  // CHECK-NEXT: %{{.+}} = cleave.xor %[[I]], %[[J]] : tensor<2x1xi64>, tensor<5xi64> -> tensor<2x5xi64>
  %14 = cleave.xor %i, %j : tensor<2x1xi64>, tensor<5xi64> -> tensor<2x5xi64>
  // CHECK-NEXT: %{{.+}} = cleave.shift_left %[[I]], %[[J]] : tensor<2x1xi64>, tensor<5xi64> -> tensor<2x5xi64>
  %15 = cleave.shift_left %i, %j : tensor<2x1xi64>, tensor<5xi64> -> tensor<2x5xi64>
  // CHECK-NEXT: %{{.+}} = cleave.shift_right %[[J]], %[[I]] : tensor<5xi64>, tensor<2x1xi64> -> tensor<2x5xi64>
  %16 = cleave.shift_right %j, %i : tensor<5xi64>, tensor<2x1xi64> -> tensor<2x5xi64>
  // Integer powers.
  // CHECK-NEXT: %{{.+}} = cleave.pow %[[I]], %[[J]] : tensor<2x1xi64>, tensor<5xi64> -> tensor<2x5xi64>
  %17 = cleave.pow %i, %j : tensor<2x1xi64>, tensor<5xi64> -> tensor<2x5xi64>
  // CHECK-NEXT: %{{.+}} = cleave.not %[[I]] : tensor<2x1xi64>
  %18 = cleave.not %i : tensor<2x1xi64>
  return
}

// CHECK-LABEL: func.func @compare_where(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<2x8xf32>, %[[S:[^:]+]]: tensor<f32>, %[[I:[^:]+]]: tensor<4x1xi64>, %[[J:[^:]+]]: tensor<3xi64>, %[[M:[^:]+]]: tensor<8x8xi1>, %[[X:[^:]+]]: tensor<2x8x8xf32>)
func.func @compare_where(%a: tensor<2x8xf32>, %s: tensor<f32>, %i: tensor<4x1xi64>, %j: tensor<3xi64>, %m: tensor<8x8xi1>, %x: tensor<2x8x8xf32>) {
  // CHECK-NEXT: %[[R0:[^ ]+]] = cleave.compare eq, %[[A]], %[[S]] : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xi1>
  %0 = cleave.compare eq, %a, %s : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xi1>
  // CHECK-NEXT: %{{.+}} = cleave.compare ne, %[[A]], %[[A]] : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xi1>
  %1 = cleave.compare ne, %a, %a : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xi1>
  // The result is i1 whatever the operand element type; shapes broadcast.
  // CHECK-NEXT: %{{.+}} = cleave.compare lt, %[[I]], %[[J]] : tensor<4x1xi64>, tensor<3xi64> -> tensor<4x3xi1>
  %2 = cleave.compare lt, %i, %j : tensor<4x1xi64>, tensor<3xi64> -> tensor<4x3xi1>
  // CHECK-NEXT: %{{.+}} = cleave.compare le, %[[S]], %[[A]] : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xi1>
  %3 = cleave.compare le, %s, %a : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xi1>
  // CHECK-NEXT: %{{.+}} = cleave.compare gt, %[[J]], %[[I]] : tensor<3xi64>, tensor<4x1xi64> -> tensor<4x3xi1>
  %4 = cleave.compare gt, %j, %i : tensor<3xi64>, tensor<4x1xi64> -> tensor<4x3xi1>
  // CHECK-NEXT: %{{.+}} = cleave.compare ge, %[[A]], %[[S]] : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xi1>
  %5 = cleave.compare ge, %a, %s : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xi1>
  // The condition broadcasts with the values but does not set the element type.
  // CHECK-NEXT: %{{.+}} = cleave.where %[[M]], %[[S]], %[[X]] : tensor<8x8xi1>, tensor<f32>, tensor<2x8x8xf32> -> tensor<2x8x8xf32>
  %6 = cleave.where %m, %s, %x : tensor<8x8xi1>, tensor<f32>, tensor<2x8x8xf32> -> tensor<2x8x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.where %[[R0]], %[[A]], %[[S]] : tensor<2x8xi1>, tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %7 = cleave.where %0, %a, %s : tensor<2x8xi1>, tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.where %[[M]], %[[S]], %[[S]] : tensor<8x8xi1>, tensor<f32>, tensor<f32> -> tensor<8x8xf32>
  %8 = cleave.where %m, %s, %s : tensor<8x8xi1>, tensor<f32>, tensor<f32> -> tensor<8x8xf32>
  return
}

// CHECK-LABEL: func.func @cast_triangle(
// CHECK-SAME:    %[[I:[^:]+]]: tensor<2x8xi64>, %[[X:[^:]+]]: tensor<2x8x8xf32>, %[[M:[^:]+]]: tensor<8x8xi1>)
func.func @cast_triangle(%i: tensor<2x8xi64>, %x: tensor<2x8x8xf32>, %m: tensor<8x8xi1>) {
  // CHECK-NEXT: %{{.+}} = cleave.cast %[[I]] : tensor<2x8xi64> to tensor<2x8xf32>
  %0 = cleave.cast %i : tensor<2x8xi64> to tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.cast %[[X]] : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %1 = cleave.cast %x : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  // CHECK-NEXT: %{{.+}} = cleave.cast %[[X]] : tensor<2x8x8xf32> to tensor<2x8x8xi1>
  %2 = cleave.cast %x : tensor<2x8x8xf32> to tensor<2x8x8xi1>
  // CHECK-NEXT: %{{.+}} = cleave.cast %[[X]] : tensor<2x8x8xf32> to tensor<2x8x8xf32>
  %3 = cleave.cast %x : tensor<2x8x8xf32> to tensor<2x8x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.tril %[[X]] : tensor<2x8x8xf32>
  %4 = cleave.tril %x : tensor<2x8x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.tril %[[M]] {diagonal = -1 : i64} : tensor<8x8xi1>
  %5 = cleave.tril %m {diagonal = -1 : i64} : tensor<8x8xi1>
  // CHECK-NEXT: %{{.+}} = cleave.triu %[[X]] {diagonal = 1 : i64} : tensor<2x8x8xf32>
  %6 = cleave.triu %x {diagonal = 1 : i64} : tensor<2x8x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.triu %[[M]] : tensor<8x8xi1>
  %7 = cleave.triu %m {diagonal = 0 : i64} : tensor<8x8xi1>
  return
}

// CHECK-LABEL: func.func @contractions(
// CHECK-SAME:    %[[Q:[^:]+]]: tensor<2x4x8x16xf32>, %[[K:[^:]+]]: tensor<16x8xf32>, %[[L:[^:]+]]: tensor<3x1x8x16xf32>, %[[R:[^:]+]]: tensor<5x16x4xf32>, %[[MI:[^:]+]]: tensor<4x6xi64>, %[[NI:[^:]+]]: tensor<6x2xi64>)
func.func @contractions(%q: tensor<2x4x8x16xf32>, %k: tensor<16x8xf32>, %l: tensor<3x1x8x16xf32>, %r: tensor<5x16x4xf32>, %mi: tensor<4x6xi64>, %ni: tensor<6x2xi64>) {
  // CHECK-NEXT: %{{.+}} = cleave.matmul %[[Q]], %[[K]] : tensor<2x4x8x16xf32>, tensor<16x8xf32> -> tensor<2x4x8x8xf32>
  %0 = cleave.matmul %q, %k : tensor<2x4x8x16xf32>, tensor<16x8xf32> -> tensor<2x4x8x8xf32>
  // Batch dims [3, 1] and [5] broadcast to [3, 5].
  // CHECK-NEXT: %{{.+}} = cleave.matmul %[[L]], %[[R]] : tensor<3x1x8x16xf32>, tensor<5x16x4xf32> -> tensor<3x5x8x4xf32>
  %1 = cleave.matmul %l, %r : tensor<3x1x8x16xf32>, tensor<5x16x4xf32> -> tensor<3x5x8x4xf32>
  // CHECK-NEXT: %{{.+}} = cleave.matmul %[[MI]], %[[NI]] : tensor<4x6xi64>, tensor<6x2xi64> -> tensor<4x2xi64>
  %2 = cleave.matmul %mi, %ni : tensor<4x6xi64>, tensor<6x2xi64> -> tensor<4x2xi64>
  return
}

// CHECK-LABEL: func.func @layers(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8x128xf32>, %[[W:[^:]+]]: tensor<512x128xf32>, %[[B:[^:]+]]: tensor<512xf32>, %[[V:[^:]+]]: tensor<128xbf16>, %[[WH:[^:]+]]: tensor<64x128xbf16>, %[[TABLE:[^:]+]]: tensor<100x32xf32>, %[[IDS:[^:]+]]: tensor<2x8xi64>, %[[IDS32:[^:]+]]: tensor<7xi32>)
func.func @layers(%x: tensor<2x8x128xf32>, %w: tensor<512x128xf32>, %b: tensor<512xf32>, %v: tensor<128xbf16>, %wh: tensor<64x128xbf16>, %table: tensor<100x32xf32>, %ids: tensor<2x8xi64>, %ids32: tensor<7xi32>) {
  // CHECK-NEXT: %{{.+}} = cleave.linear %[[X]], %[[W]], %[[B]] : tensor<2x8x128xf32>, tensor<512x128xf32>, tensor<512xf32> -> tensor<2x8x512xf32>
  %0 = cleave.linear %x, %w, %b : tensor<2x8x128xf32>, tensor<512x128xf32>, tensor<512xf32> -> tensor<2x8x512xf32>
  // CHECK-NEXT: %{{.+}} = cleave.linear %[[X]], %[[W]] : tensor<2x8x128xf32>, tensor<512x128xf32> -> tensor<2x8x512xf32>
  %1 = cleave.linear %x, %w : tensor<2x8x128xf32>, tensor<512x128xf32> -> tensor<2x8x512xf32>
  // A rank-1 input: [128] x [64, 128]^T -> [64].
  // CHECK-NEXT: %{{.+}} = cleave.linear %[[V]], %[[WH]] : tensor<128xbf16>, tensor<64x128xbf16> -> tensor<64xbf16>
  %2 = cleave.linear %v, %wh : tensor<128xbf16>, tensor<64x128xbf16> -> tensor<64xbf16>
  // CHECK-NEXT: %{{.+}} = cleave.embedding %[[TABLE]], %[[IDS]] : tensor<100x32xf32>, tensor<2x8xi64> -> tensor<2x8x32xf32>
  %3 = cleave.embedding %table, %ids : tensor<100x32xf32>, tensor<2x8xi64> -> tensor<2x8x32xf32>
  // CHECK-NEXT: %{{.+}} = cleave.embedding %[[TABLE]], %[[IDS32]] : tensor<100x32xf32>, tensor<7xi32> -> tensor<7x32xf32>
  %4 = cleave.embedding %table, %ids32 : tensor<100x32xf32>, tensor<7xi32> -> tensor<7x32xf32>
  return
}

// CHECK-LABEL: func.func @norms(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8x128xf32>, %[[W:[^:]+]]: tensor<128xf32>, %[[B:[^:]+]]: tensor<128xf32>, %[[W2:[^:]+]]: tensor<8x128xf32>, %[[IMG:[^:]+]]: tensor<1x64x8x8xf32>, %[[C:[^:]+]]: tensor<64xf32>, %[[Y:[^:]+]]: tensor<4x3xf32>, %[[C3:[^:]+]]: tensor<3xf32>)
func.func @norms(%x: tensor<2x8x128xf32>, %w: tensor<128xf32>, %b: tensor<128xf32>, %w2: tensor<8x128xf32>, %img: tensor<1x64x8x8xf32>, %c: tensor<64xf32>, %y: tensor<4x3xf32>, %c3: tensor<3xf32>) {
  // CHECK-NEXT: %{{.+}} = cleave.layer_norm %[[X]] weight %[[W]] bias %[[B]] {eps = 1.000000e-05 : f64, normalized_shape = array<i64: 128>} : (tensor<2x8x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
  %0 = cleave.layer_norm %x weight %w bias %b {normalized_shape = array<i64: 128>, eps = 1.0e-05 : f64} : (tensor<2x8x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
  // CHECK-NEXT: %{{.+}} = cleave.layer_norm %[[X]] {eps = 9.9999999999999995E-7 : f64, normalized_shape = array<i64: 128>} : (tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  %1 = cleave.layer_norm %x {normalized_shape = array<i64: 128>, eps = 1.0e-06 : f64} : (tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  // A negative eps is taken, as PyTorch takes it.
  // CHECK-NEXT: %{{.+}} = cleave.layer_norm %[[X]] {eps = -5.000000e-01 : f64, normalized_shape = array<i64: 128>} : (tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  %n = cleave.layer_norm %x {normalized_shape = array<i64: 128>, eps = -0.5 : f64} : (tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  // Two normalized dims, weight only.
  // CHECK-NEXT: %{{.+}} = cleave.layer_norm %[[X]] weight %[[W2]] {eps = 0.000000e+00 : f64, normalized_shape = array<i64: 8, 128>} : (tensor<2x8x128xf32>, tensor<8x128xf32>) -> tensor<2x8x128xf32>
  %2 = cleave.layer_norm %x weight %w2 {normalized_shape = array<i64: 8, 128>, eps = 0.0 : f64} : (tensor<2x8x128xf32>, tensor<8x128xf32>) -> tensor<2x8x128xf32>
  // CHECK-NEXT: %{{.+}} = cleave.layer_norm %[[X]] bias %[[B]] {eps = 1.000000e-05 : f64, normalized_shape = array<i64: 128>} : (tensor<2x8x128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
  %bias_only = cleave.layer_norm %x bias %b {normalized_shape = array<i64: 128>, eps = 1.0e-05 : f64} : (tensor<2x8x128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
  // CHECK-NEXT: %{{.+}} = cleave.batch_norm %[[IMG]], %[[C]], %[[C]] weight %[[C]] bias %[[C]] {eps = 1.000000e-05 : f64} : (tensor<1x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x8x8xf32>
  %4 = cleave.batch_norm %img, %c, %c weight %c bias %c {eps = 1.0e-05 : f64} : (tensor<1x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x8x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.batch_norm %[[IMG]], %[[C]], %[[C]] {eps = 1.000000e-03 : f64} : (tensor<1x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x8x8xf32>
  %5 = cleave.batch_norm %img, %c, %c {eps = 1.0e-03 : f64} : (tensor<1x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x8x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.batch_norm %[[Y]], %[[C3]], %[[C3]] weight %[[C3]] bias %[[C3]] {eps = 1.000000e-05 : f64} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %6 = cleave.batch_norm %y, %c3, %c3 weight %c3 bias %c3 {eps = 1.0e-05 : f64} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  // CHECK-NEXT: %{{.+}} = cleave.softmax %[[X]] {dim = 2 : i64} : tensor<2x8x128xf32>
  %7 = cleave.softmax %x {dim = 2 : i64} : tensor<2x8x128xf32>
  // CHECK-NEXT: %{{.+}} = cleave.softmax %[[X]] {dim = 0 : i64} : tensor<2x8x128xf32>
  %8 = cleave.softmax %x {dim = 0 : i64} : tensor<2x8x128xf32>
  // CHECK-NEXT: %{{.+}} = cleave.log_softmax %[[X]] {dim = 1 : i64} : tensor<2x8x128xf32>
  %9 = cleave.log_softmax %x {dim = 1 : i64} : tensor<2x8x128xf32>
  return
}

// Fused attention: causal or not, f32 or bf16, v with its own head dim and
// more keys than queries.
// CHECK-LABEL: func.func @attention(
// CHECK-SAME:    %[[Q:[^:]+]]: tensor<2x4x8x16xf32>, %[[K:[^:]+]]: tensor<2x4x10x16xf32>, %[[V:[^:]+]]: tensor<2x4x10x32xf32>, %[[H:[^:]+]]: tensor<1x2x4x8xbf16>)
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x10x16xf32>, %v: tensor<2x4x10x32xf32>, %h: tensor<1x2x4x8xbf16>) {
  // CHECK-NEXT: %{{.+}} = cleave.attention %[[Q]], %[[K]], %[[V]] {causal = true, scale = 2.500000e-01 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32>
  %0 = cleave.attention %q, %k, %v {causal = true, scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32>
  // CHECK-NEXT: %{{.+}} = cleave.attention %[[H]], %[[H]], %[[H]] {causal = false, scale = -1.000000e+00 : f64} : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xbf16>
  %1 = cleave.attention %h, %h, %h {causal = false, scale = -1.0 : f64} : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xbf16>
  return
}

// CHECK-LABEL: func.func @reductions(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8x128xf32>, %[[I:[^:]+]]: tensor<3x5xi64>)
func.func @reductions(%x: tensor<2x8x128xf32>, %i: tensor<3x5xi64>) {
  // CHECK-NEXT: %{{.+}} = cleave.reduce_sum %[[X]] {dims = array<i64: 2>} : tensor<2x8x128xf32> -> tensor<2x8xf32>
  %0 = cleave.reduce_sum %x {dims = array<i64: 2>} : tensor<2x8x128xf32> -> tensor<2x8xf32>
  // CHECK-NEXT: %{{.+}} = cleave.reduce_sum %[[X]] {dims = array<i64: 0, 2>, keepdim = true} : tensor<2x8x128xf32> -> tensor<1x8x1xf32>
  %1 = cleave.reduce_sum %x {dims = array<i64: 0, 2>, keepdim = true} : tensor<2x8x128xf32> -> tensor<1x8x1xf32>
  // CHECK-NEXT: %{{.+}} = cleave.reduce_mean %[[X]] {dims = array<i64: 2>, keepdim = true} : tensor<2x8x128xf32> -> tensor<2x8x1xf32>
  %2 = cleave.reduce_mean %x {dims = array<i64: 2>, keepdim = true} : tensor<2x8x128xf32> -> tensor<2x8x1xf32>
  // CHECK-NEXT: %{{.+}} = cleave.reduce_mean %[[X]] {dims = array<i64: 2, 1>} : tensor<2x8x128xf32> -> tensor<2xf32>
  %3 = cleave.reduce_mean %x {dims = array<i64: 2, 1>, keepdim = false} : tensor<2x8x128xf32> -> tensor<2xf32>
  // CHECK-NEXT: %{{.+}} = cleave.reduce_max %[[I]] {dims = array<i64: 1>} : tensor<3x5xi64> -> tensor<3xi64>
  %4 = cleave.reduce_max %i {dims = array<i64: 1>} : tensor<3x5xi64> -> tensor<3xi64>
  // CHECK-NEXT: %{{.+}} = cleave.reduce_max %[[I]] {dims = array<i64: 0, 1>} : tensor<3x5xi64> -> tensor<i64>
  %5 = cleave.reduce_max %i {dims = array<i64: 0, 1>} : tensor<3x5xi64> -> tensor<i64>
  // CHECK-NEXT: %{{.+}} = cleave.reduce_max %[[I]] {dims = array<i64: 0, 1>, keepdim = true} : tensor<3x5xi64> -> tensor<1x1xi64>
  %6 = cleave.reduce_max %i {dims = array<i64: 0, 1>, keepdim = true} : tensor<3x5xi64> -> tensor<1x1xi64>
  // Reducing over no dims keeps the shape.
  // CHECK-NEXT: %{{.+}} = cleave.reduce_sum %[[X]] {dims = array<i64>} : tensor<2x8x128xf32> -> tensor<2x8x128xf32>
  %7 = cleave.reduce_sum %x {dims = array<i64>} : tensor<2x8x128xf32> -> tensor<2x8x128xf32>
  return
}

// Products, extrema with their indices, and scans.
// CHECK-LABEL: func.func @indexed_reductions_and_scans(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8x16xf32>, %[[I:[^:]+]]: tensor<3x5xi64>, %[[B:[^:]+]]: tensor<4xi1>, %[[H:[^:]+]]: tensor<2x3xbf16>)
func.func @indexed_reductions_and_scans(%x: tensor<2x8x16xf32>, %i: tensor<3x5xi64>, %b: tensor<4xi1>, %h: tensor<2x3xbf16>) {
  // CHECK-NEXT: %{{.+}} = cleave.reduce_prod %[[X]] {dims = array<i64: 1>} : tensor<2x8x16xf32> -> tensor<2x16xf32>
  %0 = cleave.reduce_prod %x {dims = array<i64: 1>} : tensor<2x8x16xf32> -> tensor<2x16xf32>
  // CHECK-NEXT: %{{.+}} = cleave.reduce_prod %[[I]] {dims = array<i64: 0, 1>, keepdim = true} : tensor<3x5xi64> -> tensor<1x1xi64>
  %1 = cleave.reduce_prod %i {dims = array<i64: 0, 1>, keepdim = true} : tensor<3x5xi64> -> tensor<1x1xi64>
  // CHECK-NEXT: %{{.+}}, %{{.+}} = cleave.reduce_max_index %[[X]] {dim = 1 : i64} : tensor<2x8x16xf32> -> tensor<2x16xf32>, tensor<2x16xi64>
  %2:2 = cleave.reduce_max_index %x {dim = 1 : i64} : tensor<2x8x16xf32> -> tensor<2x16xf32>, tensor<2x16xi64>
  // CHECK-NEXT: %{{.+}}, %{{.+}} = cleave.reduce_min_index %[[I]] {dim = 0 : i64, keepdim = true} : tensor<3x5xi64> -> tensor<1x5xi64>, tensor<1x5xi64>
  %3:2 = cleave.reduce_min_index %i {dim = 0 : i64, keepdim = true} : tensor<3x5xi64> -> tensor<1x5xi64>, tensor<1x5xi64>
  // Bools have extrema; a 1-D input reduces to 0-d.
  // CHECK-NEXT: %{{.+}}, %{{.+}} = cleave.reduce_max_index %[[B]] {dim = 0 : i64} : tensor<4xi1> -> tensor<i1>, tensor<i64>
  %4:2 = cleave.reduce_max_index %b {dim = 0 : i64} : tensor<4xi1> -> tensor<i1>, tensor<i64>
  // CHECK-NEXT: %{{.+}} = cleave.cumsum %[[X]] {dim = 2 : i64} : tensor<2x8x16xf32>
  %5 = cleave.cumsum %x {dim = 2 : i64} : tensor<2x8x16xf32>
  // CHECK-NEXT: %{{.+}} = cleave.cumsum %[[I]] {dim = 0 : i64, reverse = true} : tensor<3x5xi64>
  %6 = cleave.cumsum %i {dim = 0 : i64, reverse = true} : tensor<3x5xi64>
  // CHECK-NEXT: %{{.+}} = cleave.cumprod %[[H]] {dim = 1 : i64} : tensor<2x3xbf16>
  %7 = cleave.cumprod %h {dim = 1 : i64, reverse = false} : tensor<2x3xbf16>
  return
}

// Sorting and scans with indices.
// CHECK-LABEL: func.func @sort_and_index_scans(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xf32>, %[[I:[^:]+]]: tensor<5xi64>, %[[B:[^:]+]]: tensor<4xi1>)
func.func @sort_and_index_scans(%x: tensor<2x8xf32>, %i: tensor<5xi64>, %b: tensor<4xi1>) {
  // CHECK-NEXT: %{{.+}}, %{{.+}} = cleave.sort %[[X]] {descending = true, dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>, tensor<2x8xi64>
  %0:2 = cleave.sort %x {dim = 1 : i64, descending = true} : tensor<2x8xf32> -> tensor<2x8xf32>, tensor<2x8xi64>
  // CHECK-NEXT: %{{.+}}, %{{.+}} = cleave.sort %[[B]] {dim = 0 : i64} : tensor<4xi1> -> tensor<4xi1>, tensor<4xi64>
  %1:2 = cleave.sort %b {dim = 0 : i64} : tensor<4xi1> -> tensor<4xi1>, tensor<4xi64>
  // CHECK-NEXT: %{{.+}}, %{{.+}} = cleave.cummax %[[I]] {dim = 0 : i64} : tensor<5xi64> -> tensor<5xi64>, tensor<5xi64>
  %2:2 = cleave.cummax %i {dim = 0 : i64} : tensor<5xi64> -> tensor<5xi64>, tensor<5xi64>
  // CHECK-NEXT: %{{.+}}, %{{.+}} = cleave.cummin %[[X]] {dim = 0 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>, tensor<2x8xi64>
  %3:2 = cleave.cummin %x {dim = 0 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>, tensor<2x8xi64>
  // CHECK-NEXT: %{{.+}} = cleave.logcumsumexp %[[X]] {dim = 1 : i64, reverse = true} : tensor<2x8xf32>
  %4 = cleave.logcumsumexp %x {dim = 1 : i64, reverse = true} : tensor<2x8xf32>
  return
}

// CHECK-LABEL: func.func @conv_pool(
// CHECK-SAME:    %[[IMG:[^:]+]]: tensor<1x3x32x32xf32>, %[[W:[^:]+]]: tensor<64x3x7x7xf32>, %[[G:[^:]+]]: tensor<1x32x16x16xf32>, %[[GW:[^:]+]]: tensor<64x8x3x3xf32>, %[[GB:[^:]+]]: tensor<64xf32>, %[[DW:[^:]+]]: tensor<32x1x3x3xf32>, %[[P:[^:]+]]: tensor<1x64x16x16xf32>, %[[S:[^:]+]]: tensor<1x8x7x7xf32>, %[[T:[^:]+]]: tensor<1x8x5x5xf32>, %[[A:[^:]+]]: tensor<1x64x8x8xf32>, %[[F:[^:]+]]: tensor<1x512x7x7xf32>)
func.func @conv_pool(%img: tensor<1x3x32x32xf32>, %w: tensor<64x3x7x7xf32>, %g: tensor<1x32x16x16xf32>, %gw: tensor<64x8x3x3xf32>, %gb: tensor<64xf32>, %dw: tensor<32x1x3x3xf32>, %p: tensor<1x64x16x16xf32>, %s: tensor<1x8x7x7xf32>, %t: tensor<1x8x5x5xf32>, %a: tensor<1x64x8x8xf32>, %f: tensor<1x512x7x7xf32>) {
  // CHECK-NEXT: %{{.+}} = cleave.conv2d %[[IMG]], %[[W]] {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 3, 3>, stride = array<i64: 2, 2>} : tensor<1x3x32x32xf32>, tensor<64x3x7x7xf32> -> tensor<1x64x16x16xf32>
  %0 = cleave.conv2d %img, %w {stride = array<i64: 2, 2>, padding = array<i64: 3, 3>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x32x32xf32>, tensor<64x3x7x7xf32> -> tensor<1x64x16x16xf32>
  // H: (16 + 2*1 - 2*(3-1) - 1) / 1 + 1 = 14; W: (16 - 2 - 1) / 2 + 1 = 7.
  // CHECK-NEXT: %{{.+}} = cleave.conv2d %[[G]], %[[GW]], %[[GB]] {dilation = array<i64: 2, 1>, groups = 4 : i64, padding = array<i64: 1, 0>, stride = array<i64: 1, 2>} : tensor<1x32x16x16xf32>, tensor<64x8x3x3xf32>, tensor<64xf32> -> tensor<1x64x14x7xf32>
  %1 = cleave.conv2d %g, %gw, %gb {stride = array<i64: 1, 2>, padding = array<i64: 1, 0>, dilation = array<i64: 2, 1>, groups = 4 : i64} : tensor<1x32x16x16xf32>, tensor<64x8x3x3xf32>, tensor<64xf32> -> tensor<1x64x14x7xf32>
  // Depthwise: groups = channels.
  // CHECK-NEXT: %{{.+}} = cleave.conv2d %[[G]], %[[DW]] {dilation = array<i64: 1, 1>, groups = 32 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x32x16x16xf32>, tensor<32x1x3x3xf32> -> tensor<1x32x16x16xf32>
  %2 = cleave.conv2d %g, %dw {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 32 : i64} : tensor<1x32x16x16xf32>, tensor<32x1x3x3xf32> -> tensor<1x32x16x16xf32>
  // CHECK-NEXT: %{{.+}} = cleave.max_pool2d %[[P]] {dilation = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x64x16x16xf32> -> tensor<1x64x8x8xf32>
  %3 = cleave.max_pool2d %p {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, ceil_mode = false} : tensor<1x64x16x16xf32> -> tensor<1x64x8x8xf32>
  // 7 with kernel 2, stride 2: floor gives 3 windows, ceil_mode 4.
  // CHECK-NEXT: %{{.+}} = cleave.max_pool2d %[[S]] {dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<1x8x7x7xf32> -> tensor<1x8x3x3xf32>
  %4 = cleave.max_pool2d %s {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<1x8x7x7xf32> -> tensor<1x8x3x3xf32>
  // CHECK-NEXT: %{{.+}} = cleave.max_pool2d %[[S]] {ceil_mode = true, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<1x8x7x7xf32> -> tensor<1x8x4x4xf32>
  %5 = cleave.max_pool2d %s {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, ceil_mode = true} : tensor<1x8x7x7xf32> -> tensor<1x8x4x4xf32>
  // ceil_mode would give 4, but the last window would start in the right padding,
  // so PyTorch drops it: 3.
  // CHECK-NEXT: %{{.+}} = cleave.max_pool2d %[[T]] {ceil_mode = true, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x8x5x5xf32> -> tensor<1x8x3x3xf32>
  %6 = cleave.max_pool2d %t {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, ceil_mode = true} : tensor<1x8x5x5xf32> -> tensor<1x8x3x3xf32>
  // Dilation 2 makes the 3x3 kernel span 5: 16 - 4 = 12.
  // CHECK-NEXT: %{{.+}} = cleave.max_pool2d %[[P]] {dilation = array<i64: 2, 2>, kernel = array<i64: 3, 3>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x64x16x16xf32> -> tensor<1x64x12x12xf32>
  %7 = cleave.max_pool2d %p {kernel = array<i64: 3, 3>, stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 2, 2>} : tensor<1x64x16x16xf32> -> tensor<1x64x12x12xf32>
  // ceil_mode and count_include_pad are elided at their defaults (false, true).
  // CHECK-NEXT: %{{.+}} = cleave.avg_pool2d %[[A]] {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<1x64x8x8xf32> -> tensor<1x64x4x4xf32>
  %8 = cleave.avg_pool2d %a {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, ceil_mode = false, count_include_pad = true} : tensor<1x64x8x8xf32> -> tensor<1x64x4x4xf32>
  // CHECK-NEXT: %{{.+}} = cleave.avg_pool2d %[[A]] {ceil_mode = true, count_include_pad = false, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x64x8x8xf32> -> tensor<1x64x5x5xf32>
  %9 = cleave.avg_pool2d %a {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, ceil_mode = true, count_include_pad = false} : tensor<1x64x8x8xf32> -> tensor<1x64x5x5xf32>
  // CHECK-NEXT: %{{.+}} = cleave.adaptive_avg_pool2d %[[F]] {output_size = array<i64: 1, 1>} : tensor<1x512x7x7xf32> -> tensor<1x512x1x1xf32>
  %10 = cleave.adaptive_avg_pool2d %f {output_size = array<i64: 1, 1>} : tensor<1x512x7x7xf32> -> tensor<1x512x1x1xf32>
  // CHECK-NEXT: %{{.+}} = cleave.adaptive_avg_pool2d %[[F]] {output_size = array<i64: 3, 5>} : tensor<1x512x7x7xf32> -> tensor<1x512x3x5xf32>
  %11 = cleave.adaptive_avg_pool2d %f {output_size = array<i64: 3, 5>} : tensor<1x512x7x7xf32> -> tensor<1x512x3x5xf32>
  return
}

// CHECK-LABEL: func.func @data_movement(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8x128xf32>, %[[CLS:[^:]+]]: tensor<1x1x64xf32>, %[[Y:[^:]+]]: tensor<4x16x64xf32>, %[[V:[^:]+]]: tensor<3x10xi64>, %[[S:[^:]+]]: tensor<f32>)
func.func @data_movement(%x: tensor<2x8x128xf32>, %cls: tensor<1x1x64xf32>, %y: tensor<4x16x64xf32>, %v: tensor<3x10xi64>, %s: tensor<f32>) {
  // CHECK-NEXT: %[[R0:[^ ]+]] = cleave.reshape %[[X]] : tensor<2x8x128xf32> to tensor<2x8x4x32xf32>
  %0 = cleave.reshape %x : tensor<2x8x128xf32> to tensor<2x8x4x32xf32>
  // CHECK-NEXT: %{{.+}} = cleave.reshape %[[S]] : tensor<f32> to tensor<1x1xf32>
  %1 = cleave.reshape %s : tensor<f32> to tensor<1x1xf32>
  // CHECK-NEXT: %{{.+}} = cleave.reshape %[[V]] : tensor<3x10xi64> to tensor<30xi64>
  %2 = cleave.reshape %v : tensor<3x10xi64> to tensor<30xi64>
  // CHECK-NEXT: %{{.+}} = cleave.permute %[[R0]] {dims = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x32xf32> -> tensor<2x4x8x32xf32>
  %3 = cleave.permute %0 {dims = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x32xf32> -> tensor<2x4x8x32xf32>
  // CHECK-NEXT: %{{.+}} = cleave.permute %[[V]] {dims = array<i64: 1, 0>} : tensor<3x10xi64> -> tensor<10x3xi64>
  %4 = cleave.permute %v {dims = array<i64: 1, 0>} : tensor<3x10xi64> -> tensor<10x3xi64>
  // The identity permutation is valid (canonicalize removes it).
  // CHECK-NEXT: %{{.+}} = cleave.permute %[[X]] {dims = array<i64: 0, 1, 2>} : tensor<2x8x128xf32> -> tensor<2x8x128xf32>
  %5 = cleave.permute %x {dims = array<i64: 0, 1, 2>} : tensor<2x8x128xf32> -> tensor<2x8x128xf32>
  // CHECK-NEXT: %[[R6:[^ ]+]] = cleave.broadcast_to %[[CLS]] : tensor<1x1x64xf32> to tensor<4x1x64xf32>
  %6 = cleave.broadcast_to %cls : tensor<1x1x64xf32> to tensor<4x1x64xf32>
  // CHECK-NEXT: %{{.+}} = cleave.broadcast_to %[[CLS]] : tensor<1x1x64xf32> to tensor<2x4x5x64xf32>
  %7 = cleave.broadcast_to %cls : tensor<1x1x64xf32> to tensor<2x4x5x64xf32>
  // CHECK-NEXT: %{{.+}} = cleave.broadcast_to %[[S]] : tensor<f32> to tensor<3x3xf32>
  %8 = cleave.broadcast_to %s : tensor<f32> to tensor<3x3xf32>
  // CHECK-NEXT: %{{.+}} = cleave.slice %[[X]] {dim = 2 : i64, end = 32 : i64, start = 0 : i64} : tensor<2x8x128xf32> -> tensor<2x8x32xf32>
  %9 = cleave.slice %x {dim = 2 : i64, start = 0 : i64, end = 32 : i64} : tensor<2x8x128xf32> -> tensor<2x8x32xf32>
  // A step past the end keeps one element (and must not overflow).
  // CHECK-NEXT: %{{.+}} = cleave.slice %[[X]] {dim = 2 : i64, end = 8 : i64, start = 0 : i64, step = 9223372036854775807 : i64} : tensor<2x8x128xf32> -> tensor<2x8x1xf32>
  %huge_step = cleave.slice %x {dim = 2 : i64, start = 0 : i64, end = 8 : i64, step = 9223372036854775807 : i64} : tensor<2x8x128xf32> -> tensor<2x8x1xf32>
  // Indices 1, 4, 7 of 10, then 0, 4, 8; an empty slice has size 0.
  // CHECK-NEXT: %{{.+}} = cleave.slice %[[V]] {dim = 1 : i64, end = 10 : i64, start = 1 : i64, step = 3 : i64} : tensor<3x10xi64> -> tensor<3x3xi64>
  %10 = cleave.slice %v {dim = 1 : i64, start = 1 : i64, end = 10 : i64, step = 3 : i64} : tensor<3x10xi64> -> tensor<3x3xi64>
  // CHECK-NEXT: %{{.+}} = cleave.slice %[[V]] {dim = 1 : i64, end = 10 : i64, start = 0 : i64, step = 4 : i64} : tensor<3x10xi64> -> tensor<3x3xi64>
  %11 = cleave.slice %v {dim = 1 : i64, start = 0 : i64, end = 10 : i64, step = 4 : i64} : tensor<3x10xi64> -> tensor<3x3xi64>
  // CHECK-NEXT: %{{.+}} = cleave.slice %[[V]] {dim = 0 : i64, end = 2 : i64, start = 2 : i64} : tensor<3x10xi64> -> tensor<0x10xi64>
  %12 = cleave.slice %v {dim = 0 : i64, start = 2 : i64, end = 2 : i64, step = 1 : i64} : tensor<3x10xi64> -> tensor<0x10xi64>
  // CHECK-NEXT: %{{.+}} = cleave.concat %[[R6]], %[[Y]] {dim = 1 : i64} : (tensor<4x1x64xf32>, tensor<4x16x64xf32>) -> tensor<4x17x64xf32>
  %13 = cleave.concat %6, %y {dim = 1 : i64} : (tensor<4x1x64xf32>, tensor<4x16x64xf32>) -> tensor<4x17x64xf32>
  // CHECK-NEXT: %{{.+}} = cleave.concat %[[V]], %[[V]], %[[V]] {dim = 0 : i64} : (tensor<3x10xi64>, tensor<3x10xi64>, tensor<3x10xi64>) -> tensor<9x10xi64>
  %14 = cleave.concat %v, %v, %v {dim = 0 : i64} : (tensor<3x10xi64>, tensor<3x10xi64>, tensor<3x10xi64>) -> tensor<9x10xi64>
  // CHECK-NEXT: %{{.+}} = cleave.concat %[[X]] {dim = 2 : i64} : (tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  %15 = cleave.concat %x {dim = 2 : i64} : (tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  return
}

// Layout changes across a group round-trip, at global shapes (one type) and
// per-rank shapes, and so do stage boundaries.
// CHECK-LABEL: func.func @layout_changes(
func.func @layout_changes(%x: tensor<2x8x96xf32>, %part: tensor<2x8x48xf32>) -> tensor<2x8x96xf32> {
  // CHECK: cleave.all_reduce %{{.*}} {group = "tp"} : tensor<2x8x96xf32> -> tensor<2x8x96xf32>
  %0 = cleave.all_reduce %x {group = "tp"} : tensor<2x8x96xf32> -> tensor<2x8x96xf32>
  // CHECK: cleave.shard %{{.*}} {blocks = 3 : i64, dim = 2 : i64, group = "tp"} : tensor<2x8x96xf32> -> tensor<2x8x96xf32>
  %1 = cleave.shard %0 {group = "tp", dim = 2 : i64, blocks = 3 : i64} : tensor<2x8x96xf32> -> tensor<2x8x96xf32>
  // CHECK: cleave.all_to_all %{{.*}} {from_blocks = 3 : i64, from_dim = 2 : i64, group = "tp", to_blocks = 1 : i64, to_dim = 1 : i64} : tensor<2x8x96xf32> -> tensor<2x8x96xf32>
  %2 = cleave.all_to_all %1 {group = "tp", from_dim = 2 : i64, from_blocks = 3 : i64, to_dim = 1 : i64, to_blocks = 1 : i64} : tensor<2x8x96xf32> -> tensor<2x8x96xf32>
  // CHECK: cleave.all_gather %{{.*}} {blocks = 1 : i64, dim = 1 : i64, group = "dp"} : tensor<2x8x96xf32> -> tensor<2x8x96xf32>
  %3 = cleave.all_gather %2 {group = "dp", dim = 1 : i64, blocks = 1 : i64} : tensor<2x8x96xf32> -> tensor<2x8x96xf32>
  // CHECK: cleave.reduce_scatter %{{.*}} {blocks = 1 : i64, dim = 0 : i64, group = "tp"} : tensor<2x8x96xf32> -> tensor<2x8x96xf32>
  %4 = cleave.reduce_scatter %3 {group = "tp", dim = 0 : i64, blocks = 1 : i64} : tensor<2x8x96xf32> -> tensor<2x8x96xf32>
  // Per-rank shapes (after -cleave-local-shapes): a gather grows its dim.
  // CHECK: cleave.all_gather %{{.*}} : tensor<2x8x48xf32> -> tensor<2x8x96xf32>
  %g = cleave.all_gather %part {group = "tp", dim = 2 : i64, blocks = 3 : i64} : tensor<2x8x48xf32> -> tensor<2x8x96xf32>
  // CHECK: cleave.all_to_all %{{.*}} : tensor<2x8x48xf32> -> tensor<2x4x96xf32>
  %t = cleave.all_to_all %part {group = "tp", from_dim = 2 : i64, from_blocks = 3 : i64, to_dim = 1 : i64, to_blocks = 1 : i64} : tensor<2x8x48xf32> -> tensor<2x4x96xf32>
  // CHECK: cleave.send %{{.*}} {peer = 1 : i64, tag = 3 : i64} : tensor<2x8x96xf32>
  cleave.send %4 {peer = 1 : i64, tag = 3 : i64} : tensor<2x8x96xf32>
  // CHECK: cleave.recv {peer = 1 : i64, tag = 4 : i64} : tensor<2x8x96xf32>
  %5 = cleave.recv {peer = 1 : i64, tag = 4 : i64} : tensor<2x8x96xf32>
  return %5 : tensor<2x8x96xf32>
}

