// RUN: cleave-opt %s -cleave-decompose | FileCheck %s

// Composite ops become core ops; what is left carries every interface of
// the core set, so differentiation needs no rule for any composite.

// std builds var, which decomposes in the next round: two passes over the
// data (mean, then centered squares), the unbiased divisor 4 - 1 = 3.
// CHECK-LABEL: func.func @std
// CHECK: %[[MEAN:.*]] = cleave.reduce_mean %arg0 {dims = array<i64: 1>, keepdim = true} : tensor<2x4xf32> -> tensor<2x1xf32>
// CHECK-NEXT: %[[D:.*]] = cleave.sub %arg0, %[[MEAN]]
// CHECK-NEXT: %[[SQ:.*]] = cleave.mul %[[D]], %[[D]]
// CHECK-NEXT: %[[SUM:.*]] = cleave.reduce_sum %[[SQ]] {dims = array<i64: 1>} : tensor<2x4xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[N:.*]] = cleave.constant dense<3.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[VAR:.*]] = cleave.div %[[SUM]], %[[N]]
// CHECK-NEXT: %[[STD:.*]] = cleave.sqrt %[[VAR]] : tensor<2xf32>
// CHECK-NEXT: return %[[STD]]
// CHECK-NOT: cleave.std
// CHECK-NOT: cleave.var
func.func @std(%x: tensor<2x4xf32>) -> tensor<2xf32> {
  %0 = cleave.std %x {dims = array<i64: 1>, correction = 1.0 : f64} : tensor<2x4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// PyTorch's order of operations: x * clamp(x + 3, 0, 6), then / 6.
// CHECK-LABEL: func.func @hardswish
// CHECK: %[[X3:.*]] = cleave.add %arg0, %{{.*}} : tensor<8xf32>, tensor<f32>
// CHECK: %[[LO:.*]] = cleave.maximum %[[X3]]
// CHECK: %[[HI:.*]] = cleave.minimum %[[LO]]
// CHECK: %[[P:.*]] = cleave.mul %arg0, %[[HI]]
// CHECK: cleave.div %[[P]]
// CHECK-NOT: cleave.hardswish
func.func @hardswish(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = cleave.hardswish %x : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// An integer tensor holds no infinity: all false, of the input's shape.
// CHECK-LABEL: func.func @isinf_int
// CHECK: cleave.compare ne, %arg0, %arg0 : tensor<3xi64>, tensor<3xi64> -> tensor<3xi1>
// CHECK-LABEL: func.func @isinf_float
// CHECK: %[[A:.*]] = cleave.abs %arg0
// CHECK: cleave.compare eq, %[[A]], %{{.*}} : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
func.func @isinf_int(%x: tensor<3xi64>) -> tensor<3xi1> {
  %0 = cleave.isinf %x : tensor<3xi64> -> tensor<3xi1>
  return %0 : tensor<3xi1>
}
func.func @isinf_float(%x: tensor<3xf32>) -> tensor<3xi1> {
  %0 = cleave.isinf %x : tensor<3xf32> -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// logsumexp guards an infinite maximum (taken as 0), keeps dims while it
// reduces and drops them at the end.
// CHECK-LABEL: func.func @logsumexp
// CHECK: %[[M:.*]] = cleave.reduce_max %arg0 {dims = array<i64: 1>, keepdim = true}
// CHECK: cleave.where
// CHECK: cleave.exp
// CHECK: cleave.reduce_sum {{.*}} {dims = array<i64: 1>, keepdim = true}
// CHECK: cleave.log
// CHECK: cleave.reshape {{.*}} : tensor<2x1xf32> to tensor<2xf32>
func.func @logsumexp(%x: tensor<2x5xf32>) -> tensor<2xf32> {
  %0 = cleave.logsumexp %x {dims = array<i64: 1>} : tensor<2x5xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// glu: the halves along dim 1, the second gating the first.
// CHECK-LABEL: func.func @glu
// CHECK: %[[A:.*]] = cleave.slice %arg0 {dim = 1 : i64, end = 3 : i64, start = 0 : i64}
// CHECK: %[[B:.*]] = cleave.slice %arg0 {dim = 1 : i64, end = 6 : i64, start = 3 : i64}
// CHECK: %[[S:.*]] = cleave.sigmoid %[[B]]
// CHECK: cleave.mul %[[A]], %[[S]]
func.func @glu(%x: tensor<2x6xf32>) -> tensor<2x3xf32> {
  %0 = cleave.glu %x {dim = 1 : i64} : tensor<2x6xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// Reflect padding mirrors without the edge: [x1, x0 | x0 x1 x2 x3 x4 | x3].
// CHECK-LABEL: func.func @pad_reflect
// CHECK: %[[A:.*]] = cleave.slice %arg0 {dim = 1 : i64, end = 3 : i64, start = 2 : i64}
// CHECK: %[[B:.*]] = cleave.slice %arg0 {dim = 1 : i64, end = 2 : i64, start = 1 : i64}
// CHECK: %[[C:.*]] = cleave.slice %arg0 {dim = 1 : i64, end = 4 : i64, start = 3 : i64}
// CHECK: cleave.concat %[[A]], %[[B]], %arg0, %[[C]] {dim = 1 : i64}
func.func @pad_reflect(%x: tensor<2x5xf32>) -> tensor<2x8xf32> {
  %0 = cleave.pad %x {pads = array<i64: 2, 1>, mode = "reflect", value = 0.0 : f64} : tensor<2x5xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// Bilinear resampling: one matmul per spatial dim with a constant weight
// matrix; the height moves last and back.
// CHECK-LABEL: func.func @interpolate
// CHECK: %[[H:.*]] = cleave.constant dense<{{.*}}> : tensor<2x4xf32>
// CHECK: %[[P:.*]] = cleave.permute %arg0 {dims = array<i64: 0, 1, 3, 2>}
// CHECK: %[[M:.*]] = cleave.matmul %[[P]], %[[H]] : tensor<1x3x3x2xf32>, tensor<2x4xf32> -> tensor<1x3x3x4xf32>
// CHECK: cleave.permute %[[M]] {dims = array<i64: 0, 1, 3, 2>}
// CHECK: %[[W:.*]] = cleave.constant dense<{{.*}}> : tensor<3x6xf32>
// CHECK: cleave.matmul %{{.*}}, %[[W]] : tensor<1x3x4x3xf32>, tensor<3x6xf32> -> tensor<1x3x4x6xf32>
func.func @interpolate(%x: tensor<1x3x2x3xf32>) -> tensor<1x3x4x6xf32> {
  %0 = cleave.interpolate %x {mode = "linear", align_corners = false, scales = array<f64: 0.0, 0.0>} : tensor<1x3x2x3xf32> -> tensor<1x3x4x6xf32>
  return %0 : tensor<1x3x4x6xf32>
}

// ndtr through erfcx: the tail erfcx(z) exp(-z^2) / 2 at z = |x| / sqrt 2,
// 1 - tail above 0; no 0 * inf in either branch.
// CHECK-LABEL: func.func @ndtr
// CHECK-DAG: %[[A:.*]] = cleave.abs %arg0
// CHECK-DAG: %[[E:.*]] = cleave.erfcx
// CHECK-DAG: cleave.exp
// CHECK-DAG: %[[LT:.*]] = cleave.compare lt, %arg0
// CHECK-DAG: cleave.where %[[LT]]
// CHECK-NOT: cleave.ndtr
func.func @ndtr(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = cleave.ndtr %x : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// mvlgamma with p = 3: lgamma(x) + lgamma(x - 0.5) + lgamma(x - 1) + 3/2 log(pi).
// CHECK-LABEL: func.func @mvlgamma
// CHECK-DAG: cleave.lgamma %arg0
// CHECK-DAG: cleave.constant dense<-5.000000e-01>
// CHECK-DAG: cleave.lgamma
// CHECK-DAG: cleave.constant dense<-1.000000e+00>
// CHECK-DAG: cleave.lgamma
// CHECK-DAG: cleave.constant dense<1.717094{{[0-9]*}}>
// CHECK-NOT: cleave.mvlgamma
func.func @mvlgamma(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = cleave.mvlgamma %x {p = 3 : i64} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// entr: -inf below 0, 0 at 0, -x log x elsewhere (NaN stays NaN).
// CHECK-LABEL: func.func @entr
// CHECK-DAG: cleave.log %arg0
// CHECK-DAG: cleave.constant dense<0xFF800000>
// CHECK-DAG: cleave.where
// CHECK-DAG: cleave.where
// CHECK-NOT: cleave.entr
func.func @entr(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = cleave.entr %x : tensor<8xf32>
  return %0 : tensor<8xf32>
}
