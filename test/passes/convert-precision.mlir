// RUN: cleave-opt %s -split-input-file -verify-each -cleave-convert-precision | FileCheck %s
// RUN: cleave-opt %s -split-input-file -verify-each -cleave-convert-precision=dtype=f16 | FileCheck %s --check-prefix=F16
// RUN: not cleave-opt %s -split-input-file -cleave-convert-precision=dtype=f64 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: cleave-opt %s -split-input-file -cleave-plan-memory | FileCheck %s --check-prefix=MEM32
// RUN: cleave-opt %s -split-input-file -cleave-convert-precision -cleave-plan-memory | FileCheck %s --check-prefix=MEM16
// RUN: cleave-opt %s -split-input-file -cleave-test-op-cost 2>&1 | FileCheck %s --check-prefix=COST32
// RUN: cleave-opt %s -split-input-file -cleave-convert-precision -cleave-test-op-cost 2>&1 | FileCheck %s --check-prefix=COST16

// Every f32 tensor inside becomes bf16: params, constants (rounded to
// nearest, ties to even; NaN stays NaN), results, the cast from i64. The
// signature stays: the f32 input is cast to bf16 before its first user and
// the f32 result back to f32 before the return; the input returned as it is
// is not cast at all (it stays exact). Integer and i1 values, the i64 input
// and the integer buffer are untouched. -verify-each runs every op's
// verifier (type inference included) on the rewritten function.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:.*]]: tensor<2x4xf32> {cleave.name = "x"}, %[[IDX:.*]]: tensor<2xi64> {cleave.name = "idx"})
// CHECK-SAME: -> (tensor<2x3xf32>, tensor<2xi64>, tensor<2x4xf32>, tensor<2x4xi1>)
// CHECK-DAG: %[[W:.*]] = cleave.param "fc.weight" : tensor<3x4xbf16>
// CHECK-DAG: %[[B:.*]] = cleave.param "fc.bias" : tensor<3xbf16>
// CHECK-DAG: %[[POS:.*]] = cleave.param "pos" {buffer} : tensor<2xi64>
// 1 + 2^-8 is a tie that rounds down to the even 1.0; 1 + 3 * 2^-8 a tie that
// rounds up to the even 1 + 2^-6 = 1.015625.
// CHECK-DAG: %[[C:.*]] = cleave.constant dense<[1.000000e+00, 1.000000e+00, 1.015630e+00, 0x7FC0]> : tensor<4xbf16>
// CHECK: %[[XB:.*]] = cleave.cast %[[X]] : tensor<2x4xf32> to tensor<2x4xbf16>
// CHECK-NEXT: %[[S:.*]] = cleave.mul %[[XB]], %[[C]] : tensor<2x4xbf16>, tensor<4xbf16> -> tensor<2x4xbf16>
// CHECK-NEXT: %[[Y:.*]] = cleave.linear %[[S]], %[[W]], %[[B]] : tensor<2x4xbf16>, tensor<3x4xbf16>, tensor<3xbf16> -> tensor<2x3xbf16>
// CHECK-NEXT: %[[P:.*]] = cleave.softmax %[[Y]] {dim = 1 : i64} : tensor<2x3xbf16>
// CHECK-NEXT: %[[F:.*]] = cleave.cast %[[IDX]] : tensor<2xi64> to tensor<2xbf16>
// CHECK-NEXT: %[[F2:.*]] = cleave.reshape %[[F]] : tensor<2xbf16> to tensor<2x1xbf16>
// CHECK-NEXT: %[[Q:.*]] = cleave.add %[[P]], %[[F2]] : tensor<2x3xbf16>, tensor<2x1xbf16> -> tensor<2x3xbf16>
// CHECK-NEXT: %[[I:.*]] = cleave.add %[[IDX]], %[[POS]] : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
// CHECK-NEXT: %[[M:.*]] = cleave.compare gt, %[[XB]], %[[C]] : tensor<2x4xbf16>, tensor<4xbf16> -> tensor<2x4xi1>
// CHECK-NEXT: %[[Q32:.*]] = cleave.cast %[[Q]] : tensor<2x3xbf16> to tensor<2x3xf32>
// CHECK-NEXT: return %[[Q32]], %[[I]], %[[X]], %[[M]] : tensor<2x3xf32>, tensor<2xi64>, tensor<2x4xf32>, tensor<2x4xi1>
// F16-LABEL: func.func @forward(
// F16: cleave.param "fc.weight" : tensor<3x4xf16>
// F16: cleave.constant dense<[1.000000e+00, 1.003910e+00, 1.011720e+00, 0x7E00]> : tensor<4xf16>
// F16: cleave.cast %{{.*}} : tensor<2x4xf32> to tensor<2x4xf16>
// F16: cleave.cast %{{.*}} : tensor<2x3xf16> to tensor<2x3xf32>
// BAD: error: cleave-convert-precision: dtype must be bf16 or f16, got 'f64'
func.func @forward(%x: tensor<2x4xf32> {cleave.name = "x"}, %idx: tensor<2xi64> {cleave.name = "idx"})
    -> (tensor<2x3xf32>, tensor<2xi64>, tensor<2x4xf32>, tensor<2x4xi1>) {
  %w = cleave.param "fc.weight" : tensor<3x4xf32>
  %b = cleave.param "fc.bias" : tensor<3xf32>
  %pos = cleave.param "pos" {buffer} : tensor<2xi64>
  %c = cleave.constant dense<[1.0, 1.00390625, 1.01171875, 0x7FC00000]> : tensor<4xf32>
  %s = cleave.mul %x, %c : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  %y = cleave.linear %s, %w, %b : tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %p = cleave.softmax %y {dim = 1 : i64} : tensor<2x3xf32>
  %f = cleave.cast %idx : tensor<2xi64> to tensor<2xf32>
  %f2 = cleave.reshape %f : tensor<2xf32> to tensor<2x1xf32>
  %q = cleave.add %p, %f2 : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
  %i = cleave.add %idx, %pos : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
  %m = cleave.compare gt, %x, %c : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xi1>
  return %q, %i, %x, %m : tensor<2x3xf32>, tensor<2xi64>, tensor<2x4xf32>, tensor<2x4xi1>
}

// -----

// A model that already converts to bf16 itself: its cast becomes bf16 to
// bf16 and goes away; a bf16 result stays bf16 (only f32 results are cast
// back), and a value returned twice is cast once.
// CHECK-LABEL: func.func @casts(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT: %[[XB:.*]] = cleave.cast %[[X]] : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT: %[[R:.*]] = cleave.relu %[[XB]] : tensor<4xbf16>
// CHECK-NEXT: %[[E:.*]] = cleave.exp %[[R]] : tensor<4xbf16>
// CHECK-NEXT: %[[E32:.*]] = cleave.cast %[[E]] : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: return %[[R]], %[[E32]], %[[E32]]
func.func @casts(%x: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>) {
  %h = cleave.cast %x : tensor<4xf32> to tensor<4xbf16>
  %r = cleave.relu %h : tensor<4xbf16>
  %w = cleave.cast %r : tensor<4xbf16> to tensor<4xf32>
  %e = cleave.exp %w : tensor<4xf32>
  return %r, %e, %e : tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>
}

// -----

// What comes after sees bf16 bytes: memory planning and the cost interface
// count 2 bytes per element. The peak is at the relu: the input (f32, kept
// for the whole program), the first linear's output and the relu's, 256 +
// 1024 + 1024 bytes in f32, 256 + 512 + 512 in bf16. The first linear reads
// its input and weight: 256 + 4096 bytes in f32, 128 + 2048 in bf16.
// MEM32-LABEL: func.func @mlp(
// MEM32-SAME: cleave.arena_bytes = 2304 : i64, cleave.peak_live_bytes = 2304 : i64
// MEM16-LABEL: func.func @mlp(
// MEM16-SAME: cleave.arena_bytes = 1280 : i64, cleave.peak_live_bytes = 1280 : i64
// COST32-LABEL: cost of @mlp
// COST32-NEXT: cleave.linear gemm fwd: flops=8192 read=4352 written=1024
// COST16-LABEL: cost of @mlp
// COST16-NEXT: cleave.cast elementwise fwd: flops=0 read=256 written=128
// COST16-NEXT: cleave.linear gemm fwd: flops=8192 read=2176 written=512
func.func @mlp(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %w1 = cleave.param "fc1.weight" : tensor<64x16xf32>
  %w2 = cleave.param "fc2.weight" : tensor<16x64xf32>
  %h = cleave.linear %x, %w1 : tensor<4x16xf32>, tensor<64x16xf32> -> tensor<4x64xf32>
  %r = cleave.relu %h : tensor<4x64xf32>
  %y = cleave.linear %r, %w2 : tensor<4x64xf32>, tensor<16x64xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
