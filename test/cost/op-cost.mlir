// RUN: cleave-opt %s -mlir-disable-threading -cleave-test-op-cost -o /dev/null | FileCheck %s

// Every number below is worked out by hand from the op's shapes.

// CHECK-LABEL: cost of @mlp
func.func @mlp(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %w = cleave.param "fc.weight" : tensor<16x8xf32>
  %b = cleave.param "fc.bias" : tensor<16xf32>
  // GEMM 4x16x8: 2*4*16*8 = 1024 FLOPs + 64 for the bias. Reads x (128 B),
  // w (512 B), b (64 B); writes 256 B. Backward: dX and dW products (2048)
  // + the bias sum (64); reads dY (256) + x and w (640); writes dX (128), dW
  // (512), db (64). Keeps x (128 B) as its activation; w is a parameter.
  // CHECK-NEXT: cleave.linear gemm fwd: flops=1088 read=704 written=256 kernels=1 bwd: flops=2112 read=896 written=704 kernels=3 saved=128 gemm=1x4x16x8
  %y = cleave.linear %x, %w, %b : tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<4x16xf32>
  // gelu: 18 FLOPs per element (64 elements); its backward (19 per element)
  // reads dY and the saved input.
  // CHECK-NEXT: cleave.gelu elementwise fwd: flops=1152 read=256 written=256 kernels=1 bwd: flops=1216 read=512 written=256 kernels=1 saved=256
  %g = cleave.gelu %y : tensor<4x16xf32>
  // add keeps nothing: its gradient passes straight through.
  // CHECK-NEXT: cleave.add elementwise fwd: flops=64 read=512 written=256 kernels=1 bwd: flops=128 read=256 written=512 kernels=1 saved=0
  %s = cleave.add %g, %y : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  // A reshape is a view: no kernel, no line.
  %r = cleave.reshape %s : tensor<4x16xf32> to tensor<64xf32>
  %back = cleave.reshape %r : tensor<64xf32> to tensor<4x16xf32>
  // softmax: 14 FLOPs per element forward, 4 backward; keeps its result.
  // CHECK-NEXT: cleave.softmax reduction fwd: flops=896 read=256 written=256 kernels=1 bwd: flops=256 read=512 written=256 kernels=1 saved=256
  %p = cleave.softmax %back {dim = 1 : i64} : tensor<4x16xf32>
  // CHECK-NOT: cleave
  return %p : tensor<4x16xf32>
}

// CHECK-LABEL: cost of @attention
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32> {
  // Batched GEMM: 8 products of 8x8x16 = 8 * 2*8*8*16 = 16384 FLOPs; both
  // operands are activations, so both are kept and both get gradients.
  // CHECK-NEXT: cleave.matmul gemm fwd: flops=16384 read=8192 written=2048 kernels=1 bwd: flops=32768 read=10240 written=8192 kernels=2 saved=8192 gemm=8x8x8x16
  %s = cleave.matmul %q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  return %s : tensor<2x4x8x8xf32>
}

// CHECK-LABEL: cost of @fused_attention
func.func @fused_attention(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  // 2 heads of 4 queries x 6 keys = 48 pairs, each 2*8 (q.k) + 2*4 (p*v) +
  // 14 (softmax) = 38 FLOPs forward; backward 6*8 + 4*4 + 14 + 3 = 81 per
  // pair. Reads q, k, v (256 + 384 + 192 bytes), writes the 128-byte result;
  // backward also reads the result, its gradient and 32 bytes of
  // log-sum-exp, and writes three gradients. q, k, v, the result and the
  // log-sum-exp are kept.
  // CHECK-NEXT: cleave.attention attention fwd: flops=1824 read=832 written=128 kernels=1 bwd: flops=3888 read=1120 written=832 kernels=2 saved=992
  %dense = cleave.attention %q, %k, %v {causal = false, scale = 0.5 : f64} : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x4xf32> -> tensor<1x2x4x4xf32>
  // Causal: query i sees keys j <= i + 2, so 3 + 4 + 5 + 6 = 18 pairs per
  // head of 24; bytes stay.
  // CHECK-NEXT: cleave.attention attention fwd: flops=1368 read=832 written=128 kernels=1 bwd: flops=2916 read=1120 written=832 kernels=2 saved=992
  %causal = cleave.attention %q, %k, %v {causal = true, scale = 0.5 : f64} : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x4xf32> -> tensor<1x2x4x4xf32>
  return %dense, %causal : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// CHECK-LABEL: cost of @dropout
func.func @dropout(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // A plan's forward is inference: no kernel. Training reads 64 bytes and
  // writes 64 bytes and a 16-byte mask (2 FLOPs per element: compare,
  // scale); its backward reads the gradient and the mask; the mask is kept.
  // CHECK-NEXT: cleave.dropout elementwise fwd: flops=0 read=0 written=0 kernels=0 bwd: flops=0 read=0 written=0 kernels=0 saved=0
  // CHECK-NEXT: cleave.dropout training elementwise fwd: flops=32 read=64 written=80 kernels=1 bwd: flops=16 read=80 written=64 kernels=1 saved=16
  %y = cleave.dropout %x {p = 1.000000e-01 : f64} : tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// CHECK-LABEL: cost of @conv
func.func @conv(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x4x4xf32> {
  %w = cleave.param "conv.weight" : tensor<4x3x3x3xf32>
  // Implicit GEMM [1*4*4, 3*3*3] x [27, 4]: 2*16*4*27 = 3456 FLOPs.
  // CHECK-NEXT: cleave.conv2d convolution fwd: flops=3456 read=1200 written=256 kernels=1 bwd: flops=6912 read=1456 written=1200 kernels=2 saved=768 gemm=1x16x4x27
  %y = cleave.conv2d %x, %w {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x4x4xf32>
  return %y : tensor<1x4x4x4xf32>
}

// A depthwise conv2d (groups = channels): its own class, one product per
// group [1*8*8, 1*3*3] x [9, 1]: 2*4*64*1*9 = 4608 FLOPs.
// CHECK-LABEL: cost of @depthwise
func.func @depthwise(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %w = cleave.param "dw.weight" : tensor<4x1x3x3xf32>
  // CHECK-NEXT: cleave.conv2d grouped_convolution fwd: flops=4608 read=1168 written=1024 kernels=1 bwd: flops=9216 read=2192 written=1168 kernels=2 saved=1024 gemm=4x64x1x9
  %y = cleave.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 4 : i64} : tensor<1x4x8x8xf32>, tensor<4x1x3x3xf32> -> tensor<1x4x8x8xf32>
  return %y : tensor<1x4x8x8xf32>
}

// Windowed pools have a class of their own: a 3x3/2 max pool, padding 1,
// over 8x8 planes gives 4x4: 4*16 = 64 outputs of 9 taps, 576 FLOPs; reads
// the input (1024 B), writes 256 B.
// CHECK-LABEL: cost of @pools
func.func @pools(%x: tensor<1x4x8x8xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x8x8xf32>) {
  // CHECK-NEXT: cleave.max_pool2d pooling fwd: flops=576 read=1024 written=256 kernels=1
  %m = cleave.max_pool2d %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  // A 3x3/1 average pool keeps 8x8: 256 outputs of 9 taps.
  // CHECK-NEXT: cleave.avg_pool2d pooling fwd: flops=2304 read=1024 written=1024 kernels=1
  %a = cleave.avg_pool2d %x {kernel = array<i64: 3, 3>, stride = array<i64: 1, 1>, padding = array<i64: 1, 1>} : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  return %m, %a : tensor<1x4x4x4xf32>, tensor<1x4x8x8xf32>
}

// Inference batch norm, a scale and shift per channel (2 FLOPs per element)
// in the normalization class: 256 elements, 512 FLOPs; reads the input
// (1024 B) and four [4] vectors (64 B), writes 1024 B.
// CHECK-LABEL: cost of @batch_norm
func.func @batch_norm(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %mean = cleave.param "bn.running_mean" : tensor<4xf32>
  %var = cleave.param "bn.running_var" : tensor<4xf32>
  %w = cleave.param "bn.weight" : tensor<4xf32>
  %b = cleave.param "bn.bias" : tensor<4xf32>
  // CHECK-NEXT: cleave.batch_norm normalization fwd: flops=512 read=1088 written=1024 kernels=1
  %y = cleave.batch_norm %x, %mean, %var weight %w bias %b {eps = 1.0e-05 : f64} : (tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  return %y : tensor<1x4x8x8xf32>
}

// A permute that moves the innermost dim (NCHW -> NHWC) is a strided copy,
// the layout class; one that keeps it (attention's head swap) copies
// contiguous runs, a map; moving only size-1 dims moves nothing. No
// arithmetic: each reads and writes 1024 B.
// CHECK-LABEL: cost of @permutes
func.func @permutes(%x: tensor<1x4x8x8xf32>, %h: tensor<2x4x8x4xf32>, %v: tensor<1x4x1x64xf32>) -> (tensor<1x8x8x4xf32>, tensor<2x8x4x4xf32>, tensor<4x1x1x64xf32>) {
  // CHECK-NEXT: cleave.permute layout fwd: flops=0 read=1024 written=1024 kernels=1
  %a = cleave.permute %x {dims = array<i64: 0, 2, 3, 1>} : tensor<1x4x8x8xf32> -> tensor<1x8x8x4xf32>
  // CHECK-NEXT: cleave.permute elementwise fwd: flops=0 read=1024 written=1024 kernels=1
  %b = cleave.permute %h {dims = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x4xf32> -> tensor<2x8x4x4xf32>
  // CHECK-NEXT: cleave.permute elementwise fwd: flops=0 read=1024 written=1024 kernels=1
  %c = cleave.permute %v {dims = array<i64: 1, 0, 2, 3>} : tensor<1x4x1x64xf32> -> tensor<4x1x1x64xf32>
  return %a, %b, %c : tensor<1x8x8x4xf32>, tensor<2x8x4x4xf32>, tensor<4x1x1x64xf32>
}
