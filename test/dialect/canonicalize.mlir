// RUN: cleave-opt %s -canonicalize | FileCheck %s

// The folders of the cleave ops, each with a case that must not fold.
// Every value is returned so that canonicalize cannot simply erase dead ops.

//===----------------------------------------------------------------------===//
// cast
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @cast_same_type(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xf32>)
// CHECK-NEXT:    return %[[X]] : tensor<2x8xf32>
func.func @cast_same_type(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = cleave.cast %x : tensor<2x8xf32> to tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// A cast that changes the element type stays.
// CHECK-LABEL: func.func @cast_other_type(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xi64>)
// CHECK-NEXT:    %[[C:.+]] = cleave.cast %[[X]] : tensor<2x8xi64> to tensor<2x8xf32>
// CHECK-NEXT:    return %[[C]] : tensor<2x8xf32>
func.func @cast_other_type(%x: tensor<2x8xi64>) -> tensor<2x8xf32> {
  %0 = cleave.cast %x : tensor<2x8xi64> to tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

//===----------------------------------------------------------------------===//
// reshape
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reshape_same_type(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xf32>)
// CHECK-NEXT:    return %[[X]] : tensor<2x8xf32>
func.func @reshape_same_type(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = cleave.reshape %x : tensor<2x8xf32> to tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// A reshape of a block argument to another shape stays.
// CHECK-LABEL: func.func @reshape_other_type(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xf32>)
// CHECK-NEXT:    %[[R:.+]] = cleave.reshape %[[X]] : tensor<2x8xf32> to tensor<16xf32>
// CHECK-NEXT:    return %[[R]] : tensor<16xf32>
func.func @reshape_other_type(%x: tensor<2x8xf32>) -> tensor<16xf32> {
  %0 = cleave.reshape %x : tensor<2x8xf32> to tensor<16xf32>
  return %0 : tensor<16xf32>
}

// reshape(reshape(x)) is one reshape of x.
// CHECK-LABEL: func.func @reshape_reshape(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xf32>)
// CHECK-NEXT:    %[[R:.+]] = cleave.reshape %[[X]] : tensor<2x8xf32> to tensor<4x4xf32>
// CHECK-NEXT:    return %[[R]] : tensor<4x4xf32>
func.func @reshape_reshape(%x: tensor<2x8xf32>) -> tensor<4x4xf32> {
  %0 = cleave.reshape %x : tensor<2x8xf32> to tensor<16xf32>
  %1 = cleave.reshape %0 : tensor<16xf32> to tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}

// A chain of three collapses to one reshape.
// CHECK-LABEL: func.func @reshape_reshape_chain(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xf32>)
// CHECK-NEXT:    %[[R:.+]] = cleave.reshape %[[X]] : tensor<2x8xf32> to tensor<1x16xf32>
// CHECK-NEXT:    return %[[R]] : tensor<1x16xf32>
func.func @reshape_reshape_chain(%x: tensor<2x8xf32>) -> tensor<1x16xf32> {
  %0 = cleave.reshape %x : tensor<2x8xf32> to tensor<16xf32>
  %1 = cleave.reshape %0 : tensor<16xf32> to tensor<4x4xf32>
  %2 = cleave.reshape %1 : tensor<4x4xf32> to tensor<1x16xf32>
  return %2 : tensor<1x16xf32>
}

// Reshaping back to the original type leaves nothing.
// CHECK-LABEL: func.func @reshape_reshape_back(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xf32>)
// CHECK-NEXT:    return %[[X]] : tensor<2x8xf32>
func.func @reshape_reshape_back(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = cleave.reshape %x : tensor<2x8xf32> to tensor<16xf32>
  %1 = cleave.reshape %0 : tensor<16xf32> to tensor<2x8xf32>
  return %1 : tensor<2x8xf32>
}

// The inner reshape has another use: it stays, the outer one reads x.
// CHECK-LABEL: func.func @reshape_reshape_multi_use(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xf32>)
// CHECK-NEXT:    %[[A:.+]] = cleave.reshape %[[X]] : tensor<2x8xf32> to tensor<16xf32>
// CHECK-NEXT:    %[[B:.+]] = cleave.reshape %[[X]] : tensor<2x8xf32> to tensor<4x4xf32>
// CHECK-NEXT:    return %[[A]], %[[B]] : tensor<16xf32>, tensor<4x4xf32>
func.func @reshape_reshape_multi_use(%x: tensor<2x8xf32>) -> (tensor<16xf32>, tensor<4x4xf32>) {
  %0 = cleave.reshape %x : tensor<2x8xf32> to tensor<16xf32>
  %1 = cleave.reshape %0 : tensor<16xf32> to tensor<4x4xf32>
  return %0, %1 : tensor<16xf32>, tensor<4x4xf32>
}

// A reshape of a permute is not a reshape of a reshape: both stay.
// CHECK-LABEL: func.func @reshape_permute(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xf32>)
// CHECK-NEXT:    %[[P:.+]] = cleave.permute %[[X]] {dims = array<i64: 1, 0>} : tensor<2x8xf32> -> tensor<8x2xf32>
// CHECK-NEXT:    %[[R:.+]] = cleave.reshape %[[P]] : tensor<8x2xf32> to tensor<16xf32>
// CHECK-NEXT:    return %[[R]] : tensor<16xf32>
func.func @reshape_permute(%x: tensor<2x8xf32>) -> tensor<16xf32> {
  %0 = cleave.permute %x {dims = array<i64: 1, 0>} : tensor<2x8xf32> -> tensor<8x2xf32>
  %1 = cleave.reshape %0 : tensor<8x2xf32> to tensor<16xf32>
  return %1 : tensor<16xf32>
}

// A reshape of a dense constant is a constant of the new shape, same elements
// in row-major order.
// CHECK-LABEL: func.func @reshape_constant(
// CHECK-NEXT:    %[[C:.+]] = cleave.constant dense<{{\[\[}}1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
// CHECK-NEXT:    return %[[C]] : tensor<3x2xi64>
func.func @reshape_constant() -> tensor<3x2xi64> {
  %0 = cleave.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %1 = cleave.reshape %0 : tensor<2x3xi64> to tensor<3x2xi64>
  return %1 : tensor<3x2xi64>
}

// CHECK-LABEL: func.func @reshape_splat(
// CHECK-NEXT:    %[[C:.+]] = cleave.constant dense<1.000000e+00> : tensor<2x2xf32>
// CHECK-NEXT:    return %[[C]] : tensor<2x2xf32>
func.func @reshape_splat() -> tensor<2x2xf32> {
  %0 = cleave.constant dense<1.0> : tensor<4xf32>
  %1 = cleave.reshape %0 : tensor<4xf32> to tensor<2x2xf32>
  return %1 : tensor<2x2xf32>
}

// A param is not a constant: its reshape stays.
// CHECK-LABEL: func.func @reshape_param(
// CHECK-NEXT:    %[[P:.+]] = cleave.param "table" : tensor<2x3xi64>
// CHECK-NEXT:    %[[R:.+]] = cleave.reshape %[[P]] : tensor<2x3xi64> to tensor<3x2xi64>
// CHECK-NEXT:    return %[[R]] : tensor<3x2xi64>
func.func @reshape_param() -> tensor<3x2xi64> {
  %0 = cleave.param "table" : tensor<2x3xi64>
  %1 = cleave.reshape %0 : tensor<2x3xi64> to tensor<3x2xi64>
  return %1 : tensor<3x2xi64>
}

//===----------------------------------------------------------------------===//
// permute
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @permute_identity(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8x4xf32>)
// CHECK-NEXT:    return %[[X]] : tensor<2x8x4xf32>
func.func @permute_identity(%x: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  %0 = cleave.permute %x {dims = array<i64: 0, 1, 2>} : tensor<2x8x4xf32> -> tensor<2x8x4xf32>
  return %0 : tensor<2x8x4xf32>
}

// A transpose keeps the type of a square matrix but is not the identity.
// CHECK-LABEL: func.func @permute_same_type(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x4xf32>)
// CHECK-NEXT:    %[[P:.+]] = cleave.permute %[[X]] {dims = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    return %[[P]] : tensor<4x4xf32>
func.func @permute_same_type(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = cleave.permute %x {dims = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

//===----------------------------------------------------------------------===//
// broadcast_to
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @broadcast_splat(
// CHECK-NEXT:    %[[C:.+]] = cleave.constant dense<5.000000e-01> : tensor<2x3xf32>
// CHECK-NEXT:    return %[[C]] : tensor<2x3xf32>
func.func @broadcast_splat() -> tensor<2x3xf32> {
  %0 = cleave.constant dense<0.5> : tensor<f32>
  %1 = cleave.broadcast_to %0 : tensor<f32> to tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @broadcast_splat_int(
// CHECK-NEXT:    %[[C:.+]] = cleave.constant dense<7> : tensor<4x3xi64>
// CHECK-NEXT:    return %[[C]] : tensor<4x3xi64>
func.func @broadcast_splat_int() -> tensor<4x3xi64> {
  %0 = cleave.constant dense<7> : tensor<1x3xi64>
  %1 = cleave.broadcast_to %0 : tensor<1x3xi64> to tensor<4x3xi64>
  return %1 : tensor<4x3xi64>
}

// A constant that is not a splat is not folded.
// CHECK-LABEL: func.func @broadcast_dense(
// CHECK-NEXT:    %[[C:.+]] = cleave.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK-NEXT:    %[[B:.+]] = cleave.broadcast_to %[[C]] : tensor<3xf32> to tensor<2x3xf32>
// CHECK-NEXT:    return %[[B]] : tensor<2x3xf32>
func.func @broadcast_dense() -> tensor<2x3xf32> {
  %0 = cleave.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %1 = cleave.broadcast_to %0 : tensor<3xf32> to tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @broadcast_same_type(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x3xf32>)
// CHECK-NEXT:    return %[[X]] : tensor<2x3xf32>
func.func @broadcast_same_type(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = cleave.broadcast_to %x : tensor<2x3xf32> to tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// A broadcast of a block argument to a larger shape stays.
// CHECK-LABEL: func.func @broadcast_other_type(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<1x3xf32>)
// CHECK-NEXT:    %[[B:.+]] = cleave.broadcast_to %[[X]] : tensor<1x3xf32> to tensor<2x3xf32>
// CHECK-NEXT:    return %[[B]] : tensor<2x3xf32>
func.func @broadcast_other_type(%x: tensor<1x3xf32>) -> tensor<2x3xf32> {
  %0 = cleave.broadcast_to %x : tensor<1x3xf32> to tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

//===----------------------------------------------------------------------===//
// Folds that compose.
//===----------------------------------------------------------------------===//

// broadcast of a splat, then reshape of the folded constant, then an identity
// permute and a same-type cast: one constant remains.
// CHECK-LABEL: func.func @compose(
// CHECK-NEXT:    %[[C:.+]] = cleave.constant dense<2> : tensor<3x2xi32>
// CHECK-NEXT:    return %[[C]] : tensor<3x2xi32>
func.func @compose() -> tensor<3x2xi32> {
  %0 = cleave.constant dense<2> : tensor<i32>
  %1 = cleave.broadcast_to %0 : tensor<i32> to tensor<2x3xi32>
  %2 = cleave.reshape %1 : tensor<2x3xi32> to tensor<3x2xi32>
  %3 = cleave.permute %2 {dims = array<i64: 0, 1>} : tensor<3x2xi32> -> tensor<3x2xi32>
  %4 = cleave.cast %3 : tensor<3x2xi32> to tensor<3x2xi32>
  return %4 : tensor<3x2xi32>
}
