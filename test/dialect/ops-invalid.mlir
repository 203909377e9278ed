// RUN: cleave-opt %s -split-input-file -verify-diagnostics

// One case per verifier, type-inference and type-constraint error of the cleave
// ops. Ops with inferred result types report the inference error and then
// "failed to infer returned types" at the same op, so those cases expect two
// errors (@+2 and @+1 both point at the op).

// Binary ops: shapes that do not broadcast (3 vs 2 in the leading dim).
func.func @broadcast_mismatch(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+2 {{operand shapes do not broadcast: tensor<2x3xf32>, tensor<4x3xf32>}}
  // expected-error @+1 {{'cleave.add' op failed to infer returned types}}
  %0 = cleave.add %a, %b : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  return
}

// -----

// Binary ops: operands must share one element type; the importer inserts casts.
func.func @broadcast_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xi64>) {
  // expected-error @+2 {{operands have different element types ('f32' and 'i64'); a cleave.cast must promote them first}}
  // expected-error @+1 {{'cleave.mul' op failed to infer returned types}}
  %0 = cleave.mul %a, %b : tensor<2x3xf32>, tensor<2x3xi64> -> tensor<2x3xf32>
  return
}

// -----

// A result type that disagrees with the inferred broadcast shape.
func.func @wrong_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'cleave.sub' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{'cleave.sub' op failed to infer returned types}}
  %0 = cleave.sub %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

// compare broadcasts like the binary ops.
func.func @compare_broadcast(%a: tensor<2x3xi64>, %b: tensor<2xi64>) {
  // expected-error @+2 {{operand shapes do not broadcast: tensor<2x3xi64>, tensor<2xi64>}}
  // expected-error @+1 {{'cleave.compare' op failed to infer returned types}}
  %0 = cleave.compare lt, %a, %b : tensor<2x3xi64>, tensor<2xi64> -> tensor<2x3xi1>
  return
}

// -----

// compare always yields i1.
func.func @compare_result_type(%a: tensor<2x3xi64>) {
  // expected-error @+1 {{'cleave.compare' op result #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<2x3xi64>'}}
  %0 = cleave.compare lt, %a, %a : tensor<2x3xi64>, tensor<2x3xi64> -> tensor<2x3xi64>
  return
}

// -----

// where: the two values share one element type.
func.func @where_element_type(%m: tensor<2x3xi1>, %a: tensor<2x3xf32>, %b: tensor<f16>) {
  // expected-error @+2 {{operands have different element types ('f32' and 'f16'); a cleave.cast must promote them first}}
  // expected-error @+1 {{'cleave.where' op failed to infer returned types}}
  %0 = cleave.where %m, %a, %b : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f16> -> tensor<2x3xf32>
  return
}

// -----

// where: the condition takes part in the broadcast.
func.func @where_condition_shape(%m: tensor<4xi1>, %a: tensor<2x3xf32>) {
  // expected-error @+2 {{operand shapes do not broadcast: tensor<2x3xf32>, tensor<2x3xf32>, tensor<4xi1>}}
  // expected-error @+1 {{'cleave.where' op failed to infer returned types}}
  %0 = cleave.where %m, %a, %a : tensor<4xi1>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

// where: the condition is i1.
func.func @where_condition_type(%m: tensor<2x3xf32>, %a: tensor<2x3xf32>) {
  // expected-error @+1 {{'cleave.where' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<2x3xf32>'}}
  %0 = cleave.where %m, %a, %a : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

// Unary ops keep the operand type (generic form, to state a different result).
func.func @unary_result_type(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'cleave.neg' op all non-scalar operands/results must have the same shape and base type}}
  %0 = "cleave.neg"(%a) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

// Float-only ops reject integer tensors.
func.func @gelu_int(%a: tensor<2x3xi64>) {
  // expected-error @+1 {{'cleave.gelu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<2x3xi64>'}}
  %0 = cleave.gelu %a : tensor<2x3xi64>
  return
}

// -----

// Rounding takes integers but not bools (PyTorch refuses to round a bool).
func.func @floor_bool(%a: tensor<2x3xi1>) {
  // expected-error @+1 {{'cleave.floor' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit signless integer or 32-bit signless integer values, but got 'tensor<2x3xi1>'}}
  %0 = cleave.floor %a : tensor<2x3xi1>
  return
}

// -----

// The trigonometric and hyperbolic maps are float-only.
func.func @atanh_int(%a: tensor<2x3xi64>) {
  // expected-error @+1 {{'cleave.atanh' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<2x3xi64>'}}
  %0 = cleave.atanh %a : tensor<2x3xi64>
  return
}

// -----

// not takes integers and bools, not floats.
func.func @not_float(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'cleave.not' op operand #0 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer or 1-bit signless integer values, but got 'tensor<2x3xf32>'}}
  %0 = cleave.not %a : tensor<2x3xf32>
  return
}

// -----

// pow takes floats and integers, not bools.
func.func @pow_bool(%a: tensor<2x3xi1>) {
  // expected-error @+1 {{'cleave.pow' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit signless integer or 32-bit signless integer values, but got 'tensor<2x3xi1>'}}
  %0 = cleave.pow %a, %a : tensor<2x3xi1>, tensor<2x3xi1> -> tensor<2x3xi1>
  return
}

// -----

// and/or/xor take integers and bools, not floats.
func.func @and_float(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'cleave.and' op operand #0 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer or 1-bit signless integer values, but got 'tensor<2x3xf32>'}}
  %0 = cleave.and %a, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @xor_float(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'cleave.xor' op operand #0 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer or 1-bit signless integer values, but got 'tensor<2x3xf32>'}}
  %0 = cleave.xor %a, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

// Shifts take integers only (PyTorch refuses bools and floats).
func.func @shift_bool(%a: tensor<2x3xi1>) {
  // expected-error @+1 {{'cleave.shift_left' op operand #0 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer values, but got 'tensor<2x3xi1>'}}
  %0 = cleave.shift_left %a, %a : tensor<2x3xi1>, tensor<2x3xi1> -> tensor<2x3xi1>
  return
}

// -----

func.func @shift_right_float(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'cleave.shift_right' op operand #0 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer values, but got 'tensor<2x3xf32>'}}
  %0 = cleave.shift_right %a, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

// matmul: K of lhs [M, K] must equal K of rhs [K, N].
func.func @matmul_contraction(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{matmul contraction dims differ: 'tensor<2x3xf32>' x 'tensor<4x5xf32>'}}
  // expected-error @+1 {{'cleave.matmul' op failed to infer returned types}}
  %0 = cleave.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
  return
}

// -----

// matmul: both operands have rank >= 2.
func.func @matmul_rank(%a: tensor<3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+2 {{matmul operands need rank >= 2, got 'tensor<3xf32>' and 'tensor<3x5xf32>'}}
  // expected-error @+1 {{'cleave.matmul' op failed to infer returned types}}
  %0 = cleave.matmul %a, %b : tensor<3xf32>, tensor<3x5xf32> -> tensor<5xf32>
  return
}

// -----

// matmul: one element type.
func.func @matmul_element_type(%a: tensor<2x3xf32>, %b: tensor<3x5xbf16>) {
  // expected-error @+2 {{matmul operands have different element types}}
  // expected-error @+1 {{'cleave.matmul' op failed to infer returned types}}
  %0 = cleave.matmul %a, %b : tensor<2x3xf32>, tensor<3x5xbf16> -> tensor<2x5xf32>
  return
}

// -----

// matmul: batch dims broadcast.
func.func @matmul_batch(%a: tensor<2x4x3xf32>, %b: tensor<3x3x5xf32>) {
  // expected-error @+2 {{matmul batch dims do not broadcast: 'tensor<2x4x3xf32>' x 'tensor<3x3x5xf32>'}}
  // expected-error @+1 {{'cleave.matmul' op failed to infer returned types}}
  %0 = cleave.matmul %a, %b : tensor<2x4x3xf32>, tensor<3x3x5xf32> -> tensor<2x4x5xf32>
  return
}

// -----

// linear: input features must match weight [out, in] dim 1.
func.func @linear_features(%x: tensor<2x8x128xf32>, %w: tensor<512x64xf32>) {
  // expected-error @+2 {{linear input features 128 differ from weight 'tensor<512x64xf32>' (expected [out, in])}}
  // expected-error @+1 {{'cleave.linear' op failed to infer returned types}}
  %0 = cleave.linear %x, %w : tensor<2x8x128xf32>, tensor<512x64xf32> -> tensor<2x8x512xf32>
  return
}

// -----

// linear: bias is [out].
func.func @linear_bias(%x: tensor<2x128xf32>, %w: tensor<512x128xf32>, %b: tensor<128xf32>) {
  // expected-error @+2 {{linear bias 'tensor<128xf32>' does not match the weight's out features 512}}
  // expected-error @+1 {{'cleave.linear' op failed to infer returned types}}
  %0 = cleave.linear %x, %w, %b : tensor<2x128xf32>, tensor<512x128xf32>, tensor<128xf32> -> tensor<2x512xf32>
  return
}

// -----

// linear: bias has the weight's element type.
func.func @linear_bias_element_type(%x: tensor<2x128xf32>, %w: tensor<512x128xf32>, %b: tensor<512xf16>) {
  // expected-error @+2 {{linear bias 'tensor<512xf16>' does not match the weight's out features 512}}
  // expected-error @+1 {{'cleave.linear' op failed to infer returned types}}
  %0 = cleave.linear %x, %w, %b : tensor<2x128xf32>, tensor<512x128xf32>, tensor<512xf16> -> tensor<2x512xf32>
  return
}

// -----

// linear: the weight is 2-D.
func.func @linear_weight_rank(%x: tensor<2x128xf32>, %w: tensor<128xf32>) {
  // expected-error @+2 {{linear needs input rank >= 1 and a 2-D weight}}
  // expected-error @+1 {{'cleave.linear' op failed to infer returned types}}
  %0 = cleave.linear %x, %w : tensor<2x128xf32>, tensor<128xf32> -> tensor<2xf32>
  return
}

// -----

// linear: the input has rank >= 1.
func.func @linear_input_rank(%x: tensor<f32>, %w: tensor<4x1xf32>) {
  // expected-error @+2 {{linear needs input rank >= 1 and a 2-D weight}}
  // expected-error @+1 {{'cleave.linear' op failed to infer returned types}}
  %0 = cleave.linear %x, %w : tensor<f32>, tensor<4x1xf32> -> tensor<4xf32>
  return
}

// -----

// linear: input and weight share one element type.
func.func @linear_element_type(%x: tensor<2x128xbf16>, %w: tensor<512x128xf32>) {
  // expected-error @+2 {{linear input and weight element types differ}}
  // expected-error @+1 {{'cleave.linear' op failed to infer returned types}}
  %0 = cleave.linear %x, %w : tensor<2x128xbf16>, tensor<512x128xf32> -> tensor<2x512xbf16>
  return
}

// -----

// embedding: the table is 2-D [rows, dim].
func.func @embedding_table(%t: tensor<100xf32>, %i: tensor<2x8xi64>) {
  // expected-error @+2 {{embedding table must be 2-D [rows, dim], got 'tensor<100xf32>'}}
  // expected-error @+1 {{'cleave.embedding' op failed to infer returned types}}
  %0 = cleave.embedding %t, %i : tensor<100xf32>, tensor<2x8xi64> -> tensor<2x8xf32>
  return
}

// -----

// embedding: indices are i64 or i32.
func.func @embedding_float_indices(%t: tensor<100x4xf32>, %i: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.embedding' op operand #1 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer values, but got 'tensor<2x8xf32>'}}
  %0 = cleave.embedding %t, %i : tensor<100x4xf32>, tensor<2x8xf32> -> tensor<2x8x4xf32>
  return
}

// -----

// layer_norm: normalized_shape must be the trailing dims of the input.
func.func @layer_norm_not_trailing(%x: tensor<2x8x128xf32>) {
  // expected-error @+1 {{'cleave.layer_norm' op normalized_shape [8] must be the trailing dims of 'tensor<2x8x128xf32>'}}
  %0 = cleave.layer_norm %x {normalized_shape = array<i64: 8>, eps = 1.0e-05 : f64} : (tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  return
}

// -----

// layer_norm: normalized_shape must not be empty.
func.func @layer_norm_empty(%x: tensor<2x8x128xf32>) {
  // expected-error @+1 {{'cleave.layer_norm' op normalized_shape [] must be the trailing dims of 'tensor<2x8x128xf32>'}}
  %0 = cleave.layer_norm %x {normalized_shape = array<i64>, eps = 1.0e-05 : f64} : (tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  return
}

// -----

// layer_norm: normalized_shape longer than the input rank.
func.func @layer_norm_too_long(%x: tensor<8xf32>) {
  // expected-error @+1 {{'cleave.layer_norm' op normalized_shape [1, 8] must be the trailing dims of 'tensor<8xf32>'}}
  %0 = cleave.layer_norm %x {normalized_shape = array<i64: 1, 8>, eps = 1.0e-05 : f64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

// layer_norm: weight has the normalized shape.
func.func @layer_norm_weight(%x: tensor<2x8x128xf32>, %w: tensor<8x128xf32>) {
  // expected-error @+1 {{'cleave.layer_norm' op weight has type 'tensor<8x128xf32>', expected shape [128] of 'f32'}}
  %0 = cleave.layer_norm %x weight %w {normalized_shape = array<i64: 128>, eps = 1.0e-05 : f64} : (tensor<2x8x128xf32>, tensor<8x128xf32>) -> tensor<2x8x128xf32>
  return
}

// -----

// layer_norm: bias has the input's element type.
func.func @layer_norm_bias(%x: tensor<2x8x128xf32>, %w: tensor<128xf32>, %b: tensor<128xbf16>) {
  // expected-error @+1 {{'cleave.layer_norm' op bias has type 'tensor<128xbf16>', expected shape [128] of 'f32'}}
  %0 = cleave.layer_norm %x weight %w bias %b {normalized_shape = array<i64: 128>, eps = 1.0e-05 : f64} : (tensor<2x8x128xf32>, tensor<128xf32>, tensor<128xbf16>) -> tensor<2x8x128xf32>
  return
}

// -----


// layer_norm: the result has the input type.
func.func @layer_norm_result(%x: tensor<2x8x128xf32>) {
  // expected-error @+1 {{'cleave.layer_norm' op failed to verify that all of {input, result} have same type}}
  %0 = cleave.layer_norm %x {normalized_shape = array<i64: 128>, eps = 1.0e-05 : f64} : (tensor<2x8x128xf32>) -> tensor<2x8x128xbf16>
  return
}

// -----

// batch_norm: mean/var/weight/bias are [C] with C = input dim 1.
func.func @batch_norm_channels(%x: tensor<1x64x8x8xf32>, %c: tensor<32xf32>) {
  // expected-error @+1 {{'cleave.batch_norm' op mean has type 'tensor<32xf32>', expected shape [64] of 'f32'}}
  %0 = cleave.batch_norm %x, %c, %c {eps = 1.0e-05 : f64} : (tensor<1x64x8x8xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<1x64x8x8xf32>
  return
}

// -----

// batch_norm: var must be 1-D [C].
func.func @batch_norm_var(%x: tensor<1x64x8x8xf32>, %c: tensor<64xf32>, %v: tensor<64x1xf32>) {
  // expected-error @+1 {{'cleave.batch_norm' op var has type 'tensor<64x1xf32>', expected shape [64] of 'f32'}}
  %0 = cleave.batch_norm %x, %c, %v {eps = 1.0e-05 : f64} : (tensor<1x64x8x8xf32>, tensor<64xf32>, tensor<64x1xf32>) -> tensor<1x64x8x8xf32>
  return
}

// -----

// batch_norm: weight has the input's element type.
func.func @batch_norm_weight(%x: tensor<1x64x8x8xf32>, %c: tensor<64xf32>, %w: tensor<64xf16>) {
  // expected-error @+1 {{'cleave.batch_norm' op weight has type 'tensor<64xf16>', expected shape [64] of 'f32'}}
  %0 = cleave.batch_norm %x, %c, %c weight %w bias %c {eps = 1.0e-05 : f64} : (tensor<1x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf16>, tensor<64xf32>) -> tensor<1x64x8x8xf32>
  return
}

// -----

// batch_norm: bias is [C].
func.func @batch_norm_bias(%x: tensor<1x64x8x8xf32>, %c: tensor<64xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'cleave.batch_norm' op bias has type 'tensor<8xf32>', expected shape [64] of 'f32'}}
  %0 = cleave.batch_norm %x, %c, %c weight %c bias %b {eps = 1.0e-05 : f64} : (tensor<1x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<8xf32>) -> tensor<1x64x8x8xf32>
  return
}

// -----

// batch_norm: input is [N, C, ...].
func.func @batch_norm_rank(%x: tensor<64xf32>, %c: tensor<64xf32>) {
  // expected-error @+1 {{'cleave.batch_norm' op input must be [N, C, ...], got 'tensor<64xf32>'}}
  %0 = cleave.batch_norm %x, %c, %c {eps = 1.0e-05 : f64} : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return
}

// -----

// batch_norm: eps >= 0.
func.func @batch_norm_eps(%x: tensor<1x64x8x8xf32>, %c: tensor<64xf32>) {
  // expected-error @+1 {{'cleave.batch_norm' op eps must be >= 0}}
  %0 = cleave.batch_norm %x, %c, %c {eps = -1.0 : f64} : (tensor<1x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x8x8xf32>
  return
}

// -----

// softmax: dim must name a dim of the input.
func.func @softmax_dim(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.softmax' op dim 2 is out of range for rank 2}}
  %0 = cleave.softmax %x {dim = 2 : i64} : tensor<2x8xf32>
  return
}

// -----

// log_softmax: dims are non-negative (the importer normalizes them).
func.func @log_softmax_dim(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.log_softmax' op dim -1 is out of range for rank 2}}
  %0 = cleave.log_softmax %x {dim = -1 : i64} : tensor<2x8xf32>
  return
}

// -----

// softmax is float-only.
func.func @softmax_int(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{'cleave.softmax' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<2x8xi64>'}}
  %0 = cleave.softmax %x {dim = 1 : i64} : tensor<2x8xi64>
  return
}

// -----

// tril/triu need rank >= 2.
func.func @tril_rank(%x: tensor<8xf32>) {
  // expected-error @+1 {{'cleave.tril' op needs a tensor of rank >= 2}}
  %0 = cleave.tril %x : tensor<8xf32>
  return
}

// -----

func.func @triu_rank(%x: tensor<f32>) {
  // expected-error @+1 {{'cleave.triu' op needs a tensor of rank >= 2}}
  %0 = cleave.triu %x {diagonal = 1 : i64} : tensor<f32>
  return
}

// -----

// cast changes only the element type. The Elementwise trait rejects the shape
// change before CastOp::verify runs, so its own "changes the shape" message
// is never reached.
func.func @cast_shape(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{'cleave.cast' op all non-scalar operands/results must have the same shape and base type}}
  %0 = cleave.cast %x : tensor<2x8xi64> to tensor<8x2xf32>
  return
}

// -----

// dropout drops with a probability strictly between 0 and 1.
func.func @dropout_p(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.dropout' op p must be in (0, 1), got 1}}
  %0 = cleave.dropout %x {p = 1.0 : f64} : tensor<2x8xf32>
  return
}

// -----

// reshape keeps the element count.
func.func @reshape_count(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.reshape' op changes the element count: 'tensor<2x8xf32>' to 'tensor<3x5xf32>'}}
  %0 = cleave.reshape %x : tensor<2x8xf32> to tensor<3x5xf32>
  return
}

// -----

// reshape keeps the element type.
func.func @reshape_element_type(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.reshape' op changes the element type: 'tensor<2x8xf32>' to 'tensor<16xf16>'}}
  %0 = cleave.reshape %x : tensor<2x8xf32> to tensor<16xf16>
  return
}

// -----

// permute: dims must be a permutation (no repeats).
func.func @permute_repeat(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{permute dims [0, 1, 1] are not a permutation of 0..2}}
  // expected-error @+1 {{'cleave.permute' op failed to infer returned types}}
  %0 = cleave.permute %x {dims = array<i64: 0, 1, 1>} : tensor<2x3x4xf32> -> tensor<2x3x3xf32>
  return
}

// -----

// permute: dims must be in range.
func.func @permute_range(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{permute dims [1, 2] are not a permutation of 0..1}}
  // expected-error @+1 {{'cleave.permute' op failed to infer returned types}}
  %0 = cleave.permute %x {dims = array<i64: 1, 2>} : tensor<2x3xf32> -> tensor<3x3xf32>
  return
}

// -----

// permute: one entry per input dim.
func.func @permute_count(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{permute needs 3 dims, got 2}}
  // expected-error @+1 {{'cleave.permute' op failed to infer returned types}}
  %0 = cleave.permute %x {dims = array<i64: 1, 0>} : tensor<2x3x4xf32> -> tensor<3x2xf32>
  return
}

// -----

// broadcast_to: only size-1 dims stretch.
func.func @broadcast_to_incompatible(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'cleave.broadcast_to' op cannot broadcast 'tensor<3x4xf32>' to 'tensor<2x5x4xf32>'}}
  %0 = cleave.broadcast_to %x : tensor<3x4xf32> to tensor<2x5x4xf32>
  return
}

// -----

// broadcast_to: dims never shrink.
func.func @broadcast_to_shrink(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'cleave.broadcast_to' op cannot broadcast 'tensor<3x4xf32>' to 'tensor<1x4xf32>'}}
  %0 = cleave.broadcast_to %x : tensor<3x4xf32> to tensor<1x4xf32>
  return
}

// -----

// broadcast_to: dims are never dropped.
func.func @broadcast_to_drop(%x: tensor<1x4xf32>) {
  // expected-error @+1 {{'cleave.broadcast_to' op cannot drop dims: 'tensor<1x4xf32>' to 'tensor<4xf32>'}}
  %0 = cleave.broadcast_to %x : tensor<1x4xf32> to tensor<4xf32>
  return
}

// -----

// broadcast_to keeps the element type.
func.func @broadcast_to_element_type(%x: tensor<1x4xf32>) {
  // expected-error @+1 {{'cleave.broadcast_to' op changes the element type}}
  %0 = cleave.broadcast_to %x : tensor<1x4xf32> to tensor<3x4xi64>
  return
}

// -----

// slice: end beyond the dim size.
func.func @slice_end(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{slice [4:9:1] is not within dim 1 of size 8 (needs 0 <= start <= end <= size, step >= 1)}}
  // expected-error @+1 {{'cleave.slice' op failed to infer returned types}}
  %0 = cleave.slice %x {dim = 1 : i64, start = 4 : i64, end = 9 : i64} : tensor<2x8xf32> -> tensor<2x5xf32>
  return
}

// -----

// slice: step >= 1.
func.func @slice_step(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{slice [0:8:0] is not within dim 1 of size 8 (needs 0 <= start <= end <= size, step >= 1)}}
  // expected-error @+1 {{'cleave.slice' op failed to infer returned types}}
  %0 = cleave.slice %x {dim = 1 : i64, start = 0 : i64, end = 8 : i64, step = 0 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

// slice: start <= end.
func.func @slice_reversed(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{slice [5:3:1] is not within dim 1 of size 8 (needs 0 <= start <= end <= size, step >= 1)}}
  // expected-error @+1 {{'cleave.slice' op failed to infer returned types}}
  %0 = cleave.slice %x {dim = 1 : i64, start = 5 : i64, end = 3 : i64} : tensor<2x8xf32> -> tensor<2x0xf32>
  return
}

// -----

// slice: dim out of range.
func.func @slice_dim(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{slice dim 2 is out of range for 'tensor<2x8xf32>'}}
  // expected-error @+1 {{'cleave.slice' op failed to infer returned types}}
  %0 = cleave.slice %x {dim = 2 : i64, start = 0 : i64, end = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

// concat: the inputs agree outside dim.
func.func @concat_mismatch(%a: tensor<4x1x64xf32>, %b: tensor<4x16x32xf32>) {
  // expected-error @+2 {{concat inputs 'tensor<4x1x64xf32>' and 'tensor<4x16x32xf32>' differ outside dim 1}}
  // expected-error @+1 {{'cleave.concat' op failed to infer returned types}}
  %0 = cleave.concat %a, %b {dim = 1 : i64} : (tensor<4x1x64xf32>, tensor<4x16x32xf32>) -> tensor<4x17x64xf32>
  return
}

// -----

// concat: the inputs have one rank.
func.func @concat_rank(%a: tensor<4x1xf32>, %b: tensor<4x1x1xf32>) {
  // expected-error @+2 {{concat inputs 'tensor<4x1xf32>' and 'tensor<4x1x1xf32>' differ outside dim 1}}
  // expected-error @+1 {{'cleave.concat' op failed to infer returned types}}
  %0 = cleave.concat %a, %b {dim = 1 : i64} : (tensor<4x1xf32>, tensor<4x1x1xf32>) -> tensor<4x2xf32>
  return
}

// -----

// concat: the inputs have one element type.
func.func @concat_element_type(%a: tensor<4x1xf32>, %b: tensor<4x1xf16>) {
  // expected-error @+2 {{concat inputs 'tensor<4x1xf32>' and 'tensor<4x1xf16>' differ outside dim 1}}
  // expected-error @+1 {{'cleave.concat' op failed to infer returned types}}
  %0 = cleave.concat %a, %b {dim = 1 : i64} : (tensor<4x1xf32>, tensor<4x1xf16>) -> tensor<4x2xf32>
  return
}

// -----

// concat: dim out of range.
func.func @concat_dim(%a: tensor<4x1xf32>) {
  // expected-error @+2 {{concat dim 2 is out of range for 'tensor<4x1xf32>'}}
  // expected-error @+1 {{'cleave.concat' op failed to infer returned types}}
  %0 = cleave.concat %a, %a {dim = 2 : i64} : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  return
}

// -----

// concat: at least one input.
func.func @concat_empty() {
  // expected-error @+2 {{concat needs at least one input}}
  // expected-error @+1 {{'cleave.concat' op failed to infer returned types}}
  %0 = cleave.concat {dim = 0 : i64} : () -> tensor<3xf32>
  return
}

// -----

// conv2d: weight depth * groups must equal the input channels.
func.func @conv2d_groups(%x: tensor<1x32x16x16xf32>, %w: tensor<64x16x3x3xf32>) {
  // expected-error @+2 {{conv2d: 32 input channels, 64 filters of depth 16 do not fit groups = 4}}
  // expected-error @+1 {{'cleave.conv2d' op failed to infer returned types}}
  %0 = cleave.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 4 : i64} : tensor<1x32x16x16xf32>, tensor<64x16x3x3xf32> -> tensor<1x64x16x16xf32>
  return
}

// -----

// fused_conv2d: the residual has the result's type.
func.func @fused_conv2d_residual(%x: tensor<1x4x6x6xf32>, %w: tensor<4x4x1x1xf32>, %r: tensor<1x4x6x1xf32>) {
  // expected-error @+1 {{'cleave.fused_conv2d' op residual 'tensor<1x4x6x1xf32>' must have the result's type 'tensor<1x4x6x6xf32>'}}
  %0 = cleave.fused_conv2d %x, %w residual %r {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x4x6x6xf32>, tensor<4x4x1x1xf32>, tensor<1x4x6x1xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// fused_conv2d: the clamp's bounds are an interval.
func.func @fused_conv2d_bounds(%x: tensor<1x4x6x6xf32>, %w: tensor<4x4x1x1xf32>) {
  // expected-error @+1 {{'cleave.fused_conv2d' op min 6.000000e+00 is above max 0.000000e+00}}
  %0 = cleave.fused_conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, min = 6.0 : f64, max = 0.0 : f64} : (tensor<1x4x6x6xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: filters must divide by groups.
func.func @conv2d_groups_filters(%x: tensor<1x32x16x16xf32>, %w: tensor<30x8x3x3xf32>) {
  // expected-error @+2 {{conv2d: 32 input channels, 30 filters of depth 8 do not fit groups = 4}}
  // expected-error @+1 {{'cleave.conv2d' op failed to infer returned types}}
  %0 = cleave.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 4 : i64} : tensor<1x32x16x16xf32>, tensor<30x8x3x3xf32> -> tensor<1x30x16x16xf32>
  return
}

// -----

// conv2d: groups >= 1.
func.func @conv2d_groups_zero(%x: tensor<1x32x16x16xf32>, %w: tensor<64x32x3x3xf32>) {
  // expected-error @+2 {{conv2d: 32 input channels, 64 filters of depth 32 do not fit groups = 0}}
  // expected-error @+1 {{'cleave.conv2d' op failed to infer returned types}}
  %0 = cleave.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 0 : i64} : tensor<1x32x16x16xf32>, tensor<64x32x3x3xf32> -> tensor<1x64x16x16xf32>
  return
}

// -----

// conv2d: stride entries >= 1.
func.func @conv2d_stride(%x: tensor<1x3x16x16xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+2 {{stride entries must be >= 1}}
  // expected-error @+1 {{'cleave.conv2d' op failed to infer returned types}}
  %0 = cleave.conv2d %x, %w {stride = array<i64: 0, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

// conv2d: stride has two entries.
func.func @conv2d_stride_entries(%x: tensor<1x3x16x16xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+2 {{stride must have 2 entries (height, width), got 1}}
  // expected-error @+1 {{'cleave.conv2d' op failed to infer returned types}}
  %0 = cleave.conv2d %x, %w {stride = array<i64: 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

// conv2d: padding entries >= 0.
func.func @conv2d_padding(%x: tensor<1x3x16x16xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+2 {{padding entries must be >= 0}}
  // expected-error @+1 {{'cleave.conv2d' op failed to infer returned types}}
  %0 = cleave.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: -1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<1x8x12x16xf32>
  return
}

// -----

// conv2d: dilation entries >= 1.
func.func @conv2d_dilation(%x: tensor<1x3x16x16xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+2 {{dilation entries must be >= 1}}
  // expected-error @+1 {{'cleave.conv2d' op failed to infer returned types}}
  %0 = cleave.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 0>, groups = 1 : i64} : tensor<1x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

// conv2d: 4-D input and weight.
func.func @conv2d_rank(%x: tensor<3x16x16xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+2 {{conv2d needs a 4-D input [N, C, H, W] and a 4-D weight [F, C/groups, KH, KW], got 'tensor<3x16x16xf32>' and 'tensor<8x3x3x3xf32>'}}
  // expected-error @+1 {{'cleave.conv2d' op failed to infer returned types}}
  %0 = cleave.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<8x16x16xf32>
  return
}

// -----

// conv2d: a 7x7 kernel does not fit a 4x4 input padded by 1.
func.func @conv2d_kernel(%x: tensor<1x3x4x4xf32>, %w: tensor<8x3x7x7xf32>) {
  // expected-error @+2 {{conv2d kernel is larger than the padded input}}
  // expected-error @+1 {{'cleave.conv2d' op failed to infer returned types}}
  %0 = cleave.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x4x4xf32>, tensor<8x3x7x7xf32> -> tensor<1x8x1x1xf32>
  return
}

// -----

// conv2d: bias has the weight's element type.
func.func @conv2d_bias_type(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf16>) {
  // expected-error @+2 {{conv2d bias 'tensor<4xf16>' must be [4] of the weight's element type}}
  // expected-error @+1 {{'cleave.conv2d' op failed to infer returned types}}
  %0 = cleave.conv2d %x, %w, %b {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf16> -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: bias is [F].
func.func @conv2d_bias(%x: tensor<1x3x16x16xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{conv2d bias 'tensor<3xf32>' must be [8] of the weight's element type}}
  // expected-error @+1 {{'cleave.conv2d' op failed to infer returned types}}
  %0 = cleave.conv2d %x, %w, %b {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x16x16xf32>, tensor<8x3x3x3xf32>, tensor<3xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

// conv2d: input and weight share one element type.
func.func @conv2d_element_type(%x: tensor<1x3x16x16xbf16>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+2 {{conv2d input and weight element types differ}}
  // expected-error @+1 {{'cleave.conv2d' op failed to infer returned types}}
  %0 = cleave.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x16x16xbf16>, tensor<8x3x3x3xf32> -> tensor<1x8x16x16xbf16>
  return
}

// -----

// Pooling: a 5x5 window does not fit a 4x4 input.
func.func @max_pool_kernel(%x: tensor<1x8x4x4xf32>) {
  // expected-error @+2 {{pooling kernel is larger than the padded input}}
  // expected-error @+1 {{'cleave.max_pool2d' op failed to infer returned types}}
  %0 = cleave.max_pool2d %x {kernel = array<i64: 5, 5>, stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<1x8x4x4xf32> -> tensor<1x8x1x1xf32>
  return
}

// -----

// Pooling: padding at most half the kernel, as in PyTorch.
func.func @max_pool_padding(%x: tensor<1x8x16x16xf32>) {
  // expected-error @+2 {{pooling padding must be at most half the kernel}}
  // expected-error @+1 {{'cleave.max_pool2d' op failed to infer returned types}}
  %0 = cleave.max_pool2d %x {kernel = array<i64: 3, 3>, stride = array<i64: 1, 1>, padding = array<i64: 2, 2>, dilation = array<i64: 1, 1>} : tensor<1x8x16x16xf32> -> tensor<1x8x18x18xf32>
  return
}

// -----

// Pooling: 4-D input.
func.func @max_pool_rank(%x: tensor<8x16x16xf32>) {
  // expected-error @+2 {{pooling needs a 4-D input [N, C, H, W], got 'tensor<8x16x16xf32>'}}
  // expected-error @+1 {{'cleave.max_pool2d' op failed to infer returned types}}
  %0 = cleave.max_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<8x16x16xf32> -> tensor<8x8x8xf32>
  return
}

// -----

// Pooling: kernel has two entries.
func.func @max_pool_kernel_entries(%x: tensor<1x8x16x16xf32>) {
  // expected-error @+2 {{kernel must have 2 entries (height, width), got 3}}
  // expected-error @+1 {{'cleave.max_pool2d' op failed to infer returned types}}
  %0 = cleave.max_pool2d %x {kernel = array<i64: 2, 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<1x8x16x16xf32> -> tensor<1x8x8x8xf32>
  return
}

// -----

// avg_pool2d shares the pooling rules.
func.func @avg_pool_kernel(%x: tensor<1x8x4x4xf32>) {
  // expected-error @+2 {{pooling kernel is larger than the padded input}}
  // expected-error @+1 {{'cleave.avg_pool2d' op failed to infer returned types}}
  %0 = cleave.avg_pool2d %x {kernel = array<i64: 2, 6>, stride = array<i64: 1, 1>, padding = array<i64: 0, 0>} : tensor<1x8x4x4xf32> -> tensor<1x8x3x1xf32>
  return
}

// -----

func.func @avg_pool_stride(%x: tensor<1x8x4x4xf32>) {
  // expected-error @+2 {{stride entries must be >= 1}}
  // expected-error @+1 {{'cleave.avg_pool2d' op failed to infer returned types}}
  %0 = cleave.avg_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, -1>, padding = array<i64: 0, 0>} : tensor<1x8x4x4xf32> -> tensor<1x8x2x2xf32>
  return
}

// -----

// adaptive_avg_pool2d: output_size entries >= 1.
func.func @adaptive_output_size(%x: tensor<1x8x4x4xf32>) {
  // expected-error @+2 {{output_size entries must be >= 1}}
  // expected-error @+1 {{'cleave.adaptive_avg_pool2d' op failed to infer returned types}}
  %0 = cleave.adaptive_avg_pool2d %x {output_size = array<i64: 0, 1>} : tensor<1x8x4x4xf32> -> tensor<1x8x0x1xf32>
  return
}

// -----

// adaptive_avg_pool2d: 4-D input.
func.func @adaptive_rank(%x: tensor<8x4x4xf32>) {
  // expected-error @+2 {{adaptive_avg_pool2d needs a 4-D input, got 'tensor<8x4x4xf32>'}}
  // expected-error @+1 {{'cleave.adaptive_avg_pool2d' op failed to infer returned types}}
  %0 = cleave.adaptive_avg_pool2d %x {output_size = array<i64: 1, 1>} : tensor<8x4x4xf32> -> tensor<8x1x1xf32>
  return
}

// -----

// Reductions: a dim may appear only once.
func.func @reduce_repeated(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{reduction dim 1 appears twice}}
  // expected-error @+1 {{'cleave.reduce_sum' op failed to infer returned types}}
  %0 = cleave.reduce_sum %x {dims = array<i64: 1, 1>} : tensor<2x8xf32> -> tensor<2xf32>
  return
}

// -----

// Reductions: dims in range.
func.func @reduce_range(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{reduction dim 2 is out of range for rank 2}}
  // expected-error @+1 {{'cleave.reduce_mean' op failed to infer returned types}}
  %0 = cleave.reduce_mean %x {dims = array<i64: 2>} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

// Reductions: dims are non-negative.
func.func @reduce_negative(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{reduction dim -1 is out of range for rank 2}}
  // expected-error @+1 {{'cleave.reduce_max' op failed to infer returned types}}
  %0 = cleave.reduce_max %x {dims = array<i64: -1>, keepdim = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  return
}

// -----

// Reductions: keepdim keeps the reduced dim as size 1.
func.func @reduce_keepdim_result(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{'cleave.reduce_sum' op inferred type(s) 'tensor<2x1xf32>' are incompatible with return type(s) of operation 'tensor<2xf32>'}}
  // expected-error @+1 {{'cleave.reduce_sum' op failed to infer returned types}}
  %0 = cleave.reduce_sum %x {dims = array<i64: 1>, keepdim = true} : tensor<2x8xf32> -> tensor<2xf32>
  return
}

// -----

// param needs a name.
func.func @param_name() {
  // expected-error @+1 {{'cleave.param' op needs a non-empty parameter name}}
  %0 = cleave.param "" : tensor<4xf32>
  return
}

// -----

// Tensors are statically shaped: dynamic dims are rejected.
func.func @param_dynamic() {
  // expected-error @+1 {{'cleave.param' op result #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit signless integer or 32-bit signless integer or 1-bit signless integer values, but got 'tensor<?x4xf32>'}}
  %0 = cleave.param "w" : tensor<?x4xf32>
  return
}

// -----

func.func @dynamic_operand(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{'cleave.relu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit signless integer or 32-bit signless integer or 1-bit signless integer values, but got 'tensor<?x4xf32>'}}
  %0 = cleave.relu %x : tensor<?x4xf32>
  return
}

// -----

// Unranked tensors too (generic form: the custom parser rejects them earlier).
func.func @unranked_operand(%x: tensor<*xf32>) {
  // expected-error @+1 {{'cleave.relu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit signless integer or 32-bit signless integer or 1-bit signless integer values, but got 'tensor<*xf32>'}}
  %0 = "cleave.relu"(%x) : (tensor<*xf32>) -> tensor<*xf32>
  return
}

// -----

// f64 is not a cleave element type.
func.func @f64_param() {
  // expected-error @+1 {{'cleave.param' op result #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit signless integer or 32-bit signless integer or 1-bit signless integer values, but got 'tensor<4xf64>'}}
  %0 = cleave.param "w" : tensor<4xf64>
  return
}

// -----

func.func @f64_constant() {
  // expected-error @+1 {{'cleave.constant' op result #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit signless integer or 32-bit signless integer or 1-bit signless integer values, but got 'tensor<4xf64>'}}
  %0 = cleave.constant dense<1.0> : tensor<4xf64>
  return
}

// -----

func.func @f64_exp(%x: tensor<4xf64>) {
  // expected-error @+1 {{'cleave.exp' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<4xf64>'}}
  %0 = cleave.exp %x : tensor<4xf64>
  return
}

// -----

// constant: the value and the result have one type (generic form).
func.func @constant_type() {
  // expected-error @+1 {{'cleave.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "cleave.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<3xf32>
  return
}

// -----

func.func @layout_change_group(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.all_reduce' op group must be "tp" or "dp", got "pp"}}
  %0 = cleave.all_reduce %x {group = "pp"} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @layout_change_dim(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.all_gather' op dim 2 is out of range for 'tensor<2x8xf32>'}}
  %0 = cleave.all_gather %x {group = "tp", dim = 2 : i64, blocks = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @layout_change_blocks(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.all_to_all' op blocks 3 does not divide dim 1 of size 8}}
  %0 = cleave.all_to_all %x {group = "tp", from_dim = 0 : i64, from_blocks = 1 : i64, to_dim = 1 : i64, to_blocks = 3 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @layout_change_local_shapes(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.all_gather' op result type 'tensor<4x16xf32>' is not the operand's 'tensor<2x8xf32>' with the dims the op changes changed}}
  %0 = cleave.all_gather %x {group = "tp", dim = 1 : i64, blocks = 1 : i64} : tensor<2x8xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @layout_change_all_reduce_type(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.all_reduce' op result type 'tensor<2x16xf32>' is not the operand's}}
  %0 = cleave.all_reduce %x {group = "tp"} : tensor<2x8xf32> -> tensor<2x16xf32>
  return
}

// -----

func.func @all_to_all_ranks(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.all_to_all' op result type 'tensor<4x2xf32>' is not the operand's}}
  %0 = cleave.all_to_all %x {group = "tp", from_dim = 0 : i64, from_blocks = 1 : i64, to_dim = 1 : i64, to_blocks = 1 : i64} : tensor<2x8xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<2x8x16xf32>, %k: tensor<2x4x8x16xf32>) {
  // expected-error @+1 {{'cleave.attention' op q must be [batch, heads, sequence, head_dim], got 'tensor<2x8x16xf32>'}}
  %0 = cleave.attention %q, %k, %k {causal = false, scale = 1.0 : f64} : tensor<2x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_element_type(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xbf16>) {
  // expected-error @+1 {{'cleave.attention' op q, k and v must have one element type}}
  %0 = cleave.attention %q, %k, %q {causal = false, scale = 1.0 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_heads(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>) {
  // expected-error @+1 {{'cleave.attention' op q, k and v must have the same batch and heads (dims 0 and 1)}}
  %0 = cleave.attention %q, %k, %k {causal = false, scale = 1.0 : f64} : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_head_dim(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x32xf32>) {
  // expected-error @+1 {{'cleave.attention' op k's head dim 32 differs from q's 16}}
  %0 = cleave.attention %q, %k, %k {causal = false, scale = 1.0 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32> -> tensor<2x4x8x32xf32>
  return
}

// -----

func.func @attention_keys(%q: tensor<2x4x8x16xf32>, %v: tensor<2x4x6x16xf32>) {
  // expected-error @+1 {{'cleave.attention' op v has 6 keys (dim 2), k has 8}}
  %0 = cleave.attention %q, %q, %v {causal = false, scale = 1.0 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32> -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_no_keys(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x0x16xf32>) {
  // expected-error @+1 {{'cleave.attention' op needs at least one key}}
  %0 = cleave.attention %q, %k, %k {causal = false, scale = 1.0 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x0x16xf32>, tensor<2x4x0x16xf32> -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_causal_keys(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>) {
  // expected-error @+1 {{'cleave.attention' op causal attention needs at least as many keys as queries, got 6 keys for 8 queries}}
  %0 = cleave.attention %q, %k, %k {causal = true, scale = 1.0 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32> -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_scale(%q: tensor<2x4x8x16xf32>) {
  // expected-error @+1 {{'cleave.attention' op scale must be finite}}
  %0 = cleave.attention %q, %q, %q {causal = false, scale = 0x7FF0000000000000 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x32xf32>) {
  // expected-error @+1 {{'cleave.attention' op result must be 'tensor<2x4x8x32xf32>' ([batch, heads, queries, v's head dim]), got 'tensor<2x4x8x16xf32>'}}
  %0 = cleave.attention %q, %q, %v {causal = false, scale = 1.0 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32> -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_integer(%q: tensor<2x4x8x16xi64>) {
  // expected-error @+1 {{'cleave.attention' op operand #0 must be statically shaped tensor of}}
  %0 = cleave.attention %q, %q, %q {causal = false, scale = 1.0 : f64} : tensor<2x4x8x16xi64>, tensor<2x4x8x16xi64>, tensor<2x4x8x16xi64> -> tensor<2x4x8x16xi64>
  return
}

// -----

func.func @reduce_max_index_empty(%x: tensor<2x0xf32>) {
  // expected-error @+1 {{'cleave.reduce_max_index' op cannot take an extremum over the empty dim 1 of 'tensor<2x0xf32>'}}
  %0:2 = cleave.reduce_max_index %x {dim = 1 : i64} : tensor<2x0xf32> -> tensor<2xf32>, tensor<2xi64>
  return
}

// -----

func.func @reduce_min_index_range(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.reduce_min_index' op dim 2 is out of range for rank 2}}
  %0:2 = cleave.reduce_min_index %x {dim = 2 : i64} : tensor<2x8xf32> -> tensor<2xf32>, tensor<2xi64>
  return
}

// -----

func.func @reduce_max_index_indices_i32(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.reduce_max_index' op result #1 must be statically shaped tensor of 64-bit signless integer values, but got 'tensor<2xi32>'}}
  %0:2 = cleave.reduce_max_index %x {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2xf32>, tensor<2xi32>
  return
}

// -----

func.func @cumsum_dim(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.cumsum' op dim 2 is out of range for rank 2}}
  %0 = cleave.cumsum %x {dim = 2 : i64} : tensor<2x8xf32>
  return
}

// -----

func.func @cumprod_bool(%x: tensor<2x8xi1>) {
  // expected-error @+1 {{'cleave.cumprod' op operand #0 must be statically shaped tensor of}}
  %0 = cleave.cumprod %x {dim = 0 : i64} : tensor<2x8xi1>
  return
}

// -----

func.func @sort_dim(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.sort' op dim -1 is out of range for rank 2}}
  %0:2 = cleave.sort %x {dim = -1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>, tensor<2x8xi64>
  return
}

// -----

func.func @sort_indices_type(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.sort' op result #1 must be statically shaped tensor of 64-bit signless integer values, but got 'tensor<2x8xi32>'}}
  %0:2 = cleave.sort %x {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>, tensor<2x8xi32>
  return
}

// -----

func.func @cummax_dim(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.cummax' op dim 2 is out of range for rank 2}}
  %0:2 = cleave.cummax %x {dim = 2 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>, tensor<2x8xi64>
  return
}

// -----

func.func @logcumsumexp_int(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{'cleave.logcumsumexp' op operand #0 must be statically shaped tensor of}}
  %0 = cleave.logcumsumexp %x {dim = 0 : i64} : tensor<2x8xi64>
  return
}

// -----

func.func @cumsum_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{'cleave.cumsum' op dim 0 is out of range for rank 0}}
  %0 = cleave.cumsum %x {dim = 0 : i64} : tensor<f32>
  return
}

// -----

// relu_backward: the gradient, relu's output and the result have one type.
func.func @relu_backward_shapes(%g: tensor<2x8xf32>, %y: tensor<8x2xf32>) {
  // expected-error @+1 {{'cleave.relu_backward' op failed to verify that all of {grad, output, result} have same type}}
  %0 = cleave.relu_backward %g, %y : (tensor<2x8xf32>, tensor<8x2xf32>) -> tensor<2x8xf32>
  return
}
