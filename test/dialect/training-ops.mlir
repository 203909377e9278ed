// RUN: cleave-opt %s | cleave-opt | FileCheck %s
// RUN: cleave-opt %s --mlir-print-op-generic | cleave-opt | FileCheck %s

// Round-trip of every op of a training step (CleaveTrainingOps.td), custom
// and generic forms.

// CHECK-LABEL: func.func @training_ops
func.func @training_ops(%x: tensor<2x3x4x4xf32>, %ids: tensor<2x5xi64>, %labels: tensor<6xi64>,
                        %q: tensor<1x2x5x8xf32>, %g2: tensor<2x5x16xf32>, %h: tensor<2x5x8xf32>) {
  // CHECK: cleave.state "step" : tensor<i64>
  %step = cleave.state "step" : tensor<i64>
  %w = cleave.param "bn.weight" : tensor<3xf32>
  %rm = cleave.param "bn.running_mean" {buffer} : tensor<3xf32>
  %rv = cleave.param "bn.running_var" {buffer} : tensor<3xf32>
  // CHECK: cleave.dropout_train %{{.*}}, %{{.*}} {p = 1.000000e-01 : f64, seed = 3 : i64, stream = 2 : i64} : tensor<2x3x4x4xf32>, tensor<i64>
  %d = cleave.dropout_train %x, %step {p = 0.1 : f64, seed = 3 : i64, stream = 2 : i64} : tensor<2x3x4x4xf32>, tensor<i64>
  // CHECK: cleave.batch_norm_train %{{.*}} weight %{{.*}} {eps = 1.000000e-05 : f64} : (tensor<2x3x4x4xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %y, %mean, %var = cleave.batch_norm_train %d weight %w {eps = 1.0e-05 : f64}
      : (tensor<2x3x4x4xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  // CHECK: cleave.update_running_stats %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {count = 32 : i64, momentum = 1.000000e-01 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  cleave.update_running_stats %rm, %rv, %mean, %var {momentum = 0.1 : f64, count = 32 : i64}
      : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  // CHECK: cleave.batch_norm_backward
  %dx, %dw, %db = cleave.batch_norm_backward %y, %x, %mean, %var, %w {eps = 1.0e-05 : f64}
      : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
      -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %logits = cleave.param "logits" : tensor<6x7xf32>
  %logp = cleave.log_softmax %logits {dim = 1 : i64} : tensor<6x7xf32>
  // CHECK: cleave.nll_loss %{{.*}}, %{{.*}} {ignore_index = 0 : si64, reduction = "sum"} : (tensor<6x7xf32>, tensor<6xi64>) -> tensor<f32>
  %l = cleave.nll_loss %logp, %labels {reduction = "sum", ignore_index = 0 : si64} : (tensor<6x7xf32>, tensor<6xi64>) -> tensor<f32>
  // CHECK: cleave.nll_loss_backward %{{.*}}, %{{.*}} : (tensor<f32>, tensor<6xi64>) -> tensor<6x7xf32>
  %gl = cleave.nll_loss_backward %l, %labels : (tensor<f32>, tensor<6xi64>) -> tensor<6x7xf32>
  // CHECK: cleave.log_softmax_backward %{{.*}}, %{{.*}} {dim = 1 : i64}
  %gs = cleave.log_softmax_backward %gl, %logp {dim = 1 : i64} : (tensor<6x7xf32>, tensor<6x7xf32>) -> tensor<6x7xf32>
  // CHECK: cleave.softmax_backward
  %gs2 = cleave.softmax_backward %gs, %logp {dim = 0 : i64} : (tensor<6x7xf32>, tensor<6x7xf32>) -> tensor<6x7xf32>
  // CHECK: cleave.layer_norm_backward
  %lx, %lw, %lb = cleave.layer_norm_backward %h, %h {normalized_shape = array<i64: 8>, eps = 1.0e-05 : f64}
      : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: cleave.attention_backward
  %dq, %dk, %dv = cleave.attention_backward %q, %q, %q, %q, %q {causal = true, scale = 0.35 : f64}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
  // CHECK: cleave.embedding_backward %{{.*}}, %{{.*}} {padding_idx = 0 : i64} : (tensor<2x5x16xf32>, tensor<2x5xi64>) -> tensor<10x16xf32>
  %de = cleave.embedding_backward %g2, %ids {padding_idx = 0 : i64} : (tensor<2x5x16xf32>, tensor<2x5xi64>) -> tensor<10x16xf32>
  %cw = cleave.param "conv.weight" : tensor<6x3x3x3xf32>
  %cg = cleave.param "conv.grad" : tensor<2x6x2x2xf32>
  // CHECK: cleave.conv2d_backward_input
  %ci = cleave.conv2d_backward_input %cg, %cw {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64}
      : (tensor<2x6x2x2xf32>, tensor<6x3x3x3xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: cleave.conv2d_backward_weight
  %cwg = cleave.conv2d_backward_weight %cg, %x {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64}
      : (tensor<2x6x2x2xf32>, tensor<2x3x4x4xf32>) -> tensor<6x3x3x3xf32>
  %pg = cleave.param "pool.grad" : tensor<2x3x2x2xf32>
  // CHECK: cleave.max_pool2d_backward
  %mp = cleave.max_pool2d_backward %pg, %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>}
      : (tensor<2x3x2x2xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: cleave.avg_pool2d_backward
  %ap = cleave.avg_pool2d_backward %pg {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>}
      : (tensor<2x3x2x2xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: cleave.adaptive_avg_pool2d_backward
  %aap = cleave.adaptive_avg_pool2d_backward %pg : (tensor<2x3x2x2xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: cleave.gelu_backward %{{.*}}, %{{.*}} {approximation = #cleave<gelu_approximation tanh>}
  %gb = cleave.gelu_backward %h, %h {approximation = #cleave<gelu_approximation tanh>} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  // CHECK: cleave.silu_backward
  %sb = cleave.silu_backward %h, %h : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  // CHECK: cleave.relu_backward %{{.*}}, %{{.*}} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %rb = cleave.relu_backward %h, %h : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  // CHECK: cleave.linear_backward_weight %{{.*}}, %{{.*}} : (tensor<2x5x16xf32>, tensor<2x5x8xf32>) -> tensor<16x8xf32>
  %lbw = cleave.linear_backward_weight %g2, %h : (tensor<2x5x16xf32>, tensor<2x5x8xf32>) -> tensor<16x8xf32>
  // CHECK: cleave.slice_backward %{{.*}} {dim = 2 : i64, end = 24 : i64, start = 8 : i64, step = 2 : i64} : (tensor<2x5x8xf32>) -> tensor<2x5x24xf32>
  %slb = cleave.slice_backward %h {dim = 2 : i64, start = 8 : i64, end = 24 : i64, step = 2 : i64} : (tensor<2x5x8xf32>) -> tensor<2x5x24xf32>
  %p = cleave.param "p" : tensor<16x8xf32>
  %m = cleave.state "optimizer.exp_avg.p" : tensor<16x8xf32>
  %v = cleave.state "optimizer.exp_avg_sq.p" : tensor<16x8xf32>
  %scale = cleave.param "scale" : tensor<f32>
  // CHECK: cleave.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} grad_scale %{{.*}} {
  cleave.adamw %p, %lbw, %m, %v, %step grad_scale %scale {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
      eps = 1.0e-08 : f64, weight_decay = 1.0e-02 : f64, schedule = "cosine", warmup_steps = 10 : i64,
      decay_steps = 100 : i64} : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<i64>, tensor<f32>
  // CHECK: cleave.sgd %{{.*}}, %{{.*}} step %{{.*}} {
  cleave.sgd %p, %lbw step %step {lr = 0.1 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, nesterov = false,
      weight_decay = 0.0 : f64, schedule = "constant", warmup_steps = 0 : i64, decay_steps = 0 : i64}
      : tensor<16x8xf32>, tensor<16x8xf32>, tensor<i64>
  // CHECK: cleave.assign %{{.*}}, %{{.*}} : tensor<i64>
  cleave.assign %step, %step : tensor<i64>
  return
}
