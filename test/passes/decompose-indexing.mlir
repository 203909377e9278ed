// RUN: cleave-opt %s -cleave-decompose | FileCheck %s

// The indexing composites become gathers, scatters, slices and views.

// index_select: the 1-D index along dim 1, broadcast to the result.
// CHECK-LABEL: func.func @index_select
// CHECK: %[[R:.*]] = cleave.reshape %arg1 : tensor<3xi64> to tensor<1x3xi64>
// CHECK-NEXT: %[[B:.*]] = cleave.broadcast_to %[[R]] : tensor<1x3xi64> to tensor<4x3xi64>
// CHECK-NEXT: cleave.gather %arg0, %[[B]] {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x3xi64> -> tensor<4x3xf32>
// CHECK-NOT: cleave.index_select
func.func @index_select(%x: tensor<4x8xf32>, %i: tensor<3xi64>) -> tensor<4x3xf32> {
  %0 = cleave.index_select %x, %i {dim = 1 : i64} : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// take: negative indices wrap by the element count, then a gather of the
// flattened input.
// CHECK-LABEL: func.func @take
// CHECK: %[[FLAT:.*]] = cleave.reshape %arg0 : tensor<4x8xf32> to tensor<32xf32>
// CHECK: cleave.constant dense<32> : tensor<i64>
// CHECK: %[[W:.*]] = cleave.where
// CHECK: %[[I:.*]] = cleave.reshape %[[W]] : tensor<2x3xi64> to tensor<6xi64>
// CHECK: %[[G:.*]] = cleave.gather %[[FLAT]], %[[I]] {dim = 0 : i64}
// CHECK: cleave.reshape %[[G]] : tensor<6xf32> to tensor<2x3xf32>
func.func @take(%x: tensor<4x8xf32>, %i: tensor<2x3xi64>) -> tensor<2x3xf32> {
  %0 = cleave.take %x, %i : (tensor<4x8xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// flip: a constant reversed index per dim.
// CHECK-LABEL: func.func @flip
// CHECK: cleave.constant dense<[7, 6, 5, 4, 3, 2, 1, 0]> : tensor<8xi64>
// CHECK: cleave.gather %arg0, %{{.*}} {dim = 1 : i64} : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi64>
func.func @flip(%x: tensor<4x8xi64>) -> tensor<4x8xi64> {
  %0 = cleave.flip %x {dims = array<i64: 1>} : tensor<4x8xi64>
  return %0 : tensor<4x8xi64>
}

// roll by -3 is roll by 5: the last 5 columns first.
// CHECK-LABEL: func.func @roll
// CHECK: %[[T:.*]] = cleave.slice %arg0 {dim = 1 : i64, end = 8 : i64, start = 3 : i64}
// CHECK: %[[H:.*]] = cleave.slice %arg0 {dim = 1 : i64, end = 3 : i64, start = 0 : i64}
// CHECK: cleave.concat %[[T]], %[[H]] {dim = 1 : i64}
func.func @roll(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = cleave.roll %x {shifts = array<i64: -3>, dims = array<i64: 1>} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// index over dims 0 and 2 (not adjacent): the indexed dims move first and
// flatten into 4 * 6 rows; row = i * 6 + j, -1 where an index is out of
// range; the result is B then the other dims.
// CHECK-LABEL: func.func @index
// CHECK: %[[P:.*]] = cleave.permute %arg0 {dims = array<i64: 0, 2, 1>} : tensor<4x5x6xf32> -> tensor<4x6x5xf32>
// CHECK-NEXT: %[[F:.*]] = cleave.reshape %[[P]] : tensor<4x6x5xf32> to tensor<24x5xf32>
// CHECK: %[[I:.*]] = cleave.where %{{.*}}, %{{.*}}, %arg1
// CHECK: %[[STRIDE:.*]] = cleave.constant dense<6> : tensor<i64>
// CHECK-NEXT: cleave.mul %[[I]], %[[STRIDE]] : tensor<3xi64>, tensor<i64> -> tensor<3xi64>
// CHECK: %[[NEG:.*]] = cleave.constant dense<-1> : tensor<i64>
// CHECK: %[[ROW:.*]] = cleave.where %{{.*}}, %{{.*}}, %[[NEG]]
// CHECK: %[[R:.*]] = cleave.reshape %[[ROW]] : tensor<3xi64> to tensor<3x1xi64>
// CHECK: %[[B:.*]] = cleave.broadcast_to %[[R]] : tensor<3x1xi64> to tensor<3x5xi64>
// CHECK: cleave.gather %[[F]], %[[B]] {dim = 0 : i64} : tensor<24x5xf32>, tensor<3x5xi64> -> tensor<3x5xf32>
// CHECK-NOT: cleave.index
func.func @index(%x: tensor<4x5x6xf32>, %i: tensor<3xi64>, %j: tensor<3xi64>) -> tensor<3x5xf32> {
  %0 = cleave.index %x[%i, %j] {dims = array<i64: 0, 2>} : (tensor<4x5x6xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// index over dim 1 alone (adjacent): B takes dim 1's place in the result.
// CHECK-LABEL: func.func @index_middle
// CHECK: cleave.gather %{{.*}}, %{{.*}} {dim = 0 : i64} : tensor<5x4x6xf32>, tensor<2x4x6xi64> -> tensor<2x4x6xf32>
// CHECK: cleave.permute %{{.*}} {dims = array<i64: 1, 0, 2>} : tensor<2x4x6xf32> -> tensor<4x2x6xf32>
func.func @index_middle(%x: tensor<4x5x6xf32>, %i: tensor<2xi64>) -> tensor<4x2x6xf32> {
  %0 = cleave.index %x[%i] {dims = array<i64: 1>} : (tensor<4x5x6xf32>, tensor<2xi64>) -> tensor<4x2x6xf32>
  return %0 : tensor<4x2x6xf32>
}

// index_put with accumulate: a scatter-sum of the broadcast values into the
// permuted input, permuted back.
// CHECK-LABEL: func.func @index_put
// CHECK: %[[P:.*]] = cleave.permute %arg0 {dims = array<i64: 1, 0>} : tensor<4x5xf32> -> tensor<5x4xf32>
// CHECK: %[[V:.*]] = cleave.broadcast_to %arg2 : tensor<f32> to tensor<4x2xf32>
// CHECK: %[[VT:.*]] = cleave.permute %[[V]] {dims = array<i64: 1, 0>} : tensor<4x2xf32> -> tensor<2x4xf32>
// CHECK: %[[S:.*]] = cleave.scatter %[[P]], %{{.*}}, %[[VT]] {dim = 0 : i64, reduce = #cleave<scatter_reduce sum>}
// CHECK: cleave.permute %[[S]] {dims = array<i64: 1, 0>} : tensor<5x4xf32> -> tensor<4x5xf32>
func.func @index_put(%x: tensor<4x5xf32>, %i: tensor<2xi64>, %v: tensor<f32>) -> tensor<4x5xf32> {
  %0 = cleave.index_put %x[%i], %v {dims = array<i64: 1>, accumulate = true} : (tensor<4x5xf32>, tensor<2xi64>, tensor<f32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// median: a sort, then the element at (n - 1) / 2, or at the first NaN
// (n - NaNs) of a slice that holds one.
// CHECK-LABEL: func.func @median
// CHECK: %[[V:.*]], %[[I:.*]] = cleave.sort %arg0 {dim = 1 : i64} : tensor<3x6xf32> -> tensor<3x6xf32>, tensor<3x6xi64>
// CHECK: cleave.constant dense<2> : tensor<3x1xi64>
// CHECK: %[[K:.*]] = cleave.where
// CHECK: cleave.gather %[[V]], %[[K]] {dim = 1 : i64} : tensor<3x6xf32>, tensor<3x1xi64> -> tensor<3x1xf32>
// CHECK: cleave.gather %[[I]], %[[K]] {dim = 1 : i64} : tensor<3x6xi64>, tensor<3x1xi64> -> tensor<3x1xi64>
// CHECK-NOT: cleave.median
func.func @median(%x: tensor<3x6xf32>) -> (tensor<3xf32>, tensor<3xi64>) {
  %0:2 = cleave.median %x {dim = 1 : i64} : tensor<3x6xf32> -> tensor<3xf32>, tensor<3xi64>
  return %0#0, %0#1 : tensor<3xf32>, tensor<3xi64>
}

// quantile: ranks q (n - 1), two gathers of the sorted slice and a lerp
// (itself decomposed).
// CHECK-LABEL: func.func @quantile
// CHECK: cleave.sort %arg0 {dim = 0 : i64} : tensor<5x3xf32>
// CHECK: cleave.permute
// CHECK: cleave.gather
// CHECK: cleave.ceil
// CHECK: cleave.gather
// CHECK-NOT: cleave.quantile
// CHECK-NOT: cleave.lerp
func.func @quantile(%x: tensor<5x3xf32>, %q: tensor<2xf32>) -> tensor<2x3xf32> {
  %0 = cleave.quantile %x, %q {dim = 0 : i64} : tensor<5x3xf32>, tensor<2xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// mode: pairwise equality counts of the slice moved last.
// CHECK-LABEL: func.func @mode
// CHECK: cleave.compare
// CHECK-SAME: tensor<2x4x1xi64>, tensor<2x1x4xi64> -> tensor<2x4x4xi1>
// CHECK-NOT: cleave.mode
func.func @mode(%x: tensor<2x4xi64>) -> (tensor<2xi64>, tensor<2xi64>) {
  %0:2 = cleave.mode %x {dim = 1 : i64} : tensor<2x4xi64> -> tensor<2xi64>, tensor<2xi64>
  return %0#0, %0#1 : tensor<2xi64>, tensor<2xi64>
}
