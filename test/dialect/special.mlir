// RUN: cleave-opt %s | cleave-opt | FileCheck %s

// The special-function ops round-trip (runtime/SpecialMath.h computes them).

// CHECK-LABEL: func.func @special
func.func @special(%x: tensor<2x8xf32>, %n: tensor<8xf32>) -> tensor<2x8xf32> {
  // CHECK: cleave.lgamma %{{.*}} : tensor<2x8xf32>
  %0 = cleave.lgamma %x : tensor<2x8xf32>
  // CHECK: cleave.polygamma %{{.*}} {n = 2 : i64} : tensor<2x8xf32>
  %1 = cleave.polygamma %0 {n = 2 : i64} : tensor<2x8xf32>
  // CHECK: cleave.erfinv
  %2 = cleave.erfinv %1 : tensor<2x8xf32>
  // CHECK: cleave.i0e
  %3 = cleave.i0e %2 : tensor<2x8xf32>
  // CHECK: cleave.modified_bessel_k1
  %4 = cleave.modified_bessel_k1 %3 : tensor<2x8xf32>
  // CHECK: cleave.airy_ai
  %5 = cleave.airy_ai %4 : tensor<2x8xf32>
  // CHECK: cleave.zeta %{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %6 = cleave.zeta %5, %n : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  // CHECK: cleave.igammac
  %7 = cleave.igammac %6, %n : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  // CHECK: cleave.orthogonal_polynomial %{{.*}}, %{{.*}} {family = "hermite_he"} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %8 = cleave.orthogonal_polynomial %7, %n {family = "hermite_he"} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return %8 : tensor<2x8xf32>
}
