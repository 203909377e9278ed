//===- Elementwise.cu - Unary, binary, compare, where, cast, tril/triu ----===//
//
// The semantics are the CPU kernels' (runtime/cpu/Elementwise.cpp): integer
// arithmetic wraps, integer `div` truncates and gives 0 for a division by
// zero, maximum/minimum propagate NaN, relu keeps NaN, float -> int casts
// truncate toward zero (NaN and out of range give the integer's minimum). bf16 is stored and computed in fp32.
//
// Same-shape (and scalar) operands take flat, vectorized loops; broadcasts
// index through the coalesced layout, in 32-bit math when it fits.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

#include <cstring>
#include <string>

namespace cleave::runtime::cuda {
namespace {

//===----------------------------------------------------------------------===//
// Flat maps: y[i] = fn(x[i]).
//===----------------------------------------------------------------------===//

template <typename In, typename Out, int V, typename Fn>
__global__ void mapKernel(const In *__restrict__ x, Out *__restrict__ y, int64_t n, Fn fn) {
  const int64_t nv = n / V;
  for (int64_t i = globalThread(); i < nv; i += globalThreads()) {
    const Vec<In, V> a = reinterpret_cast<const Vec<In, V> *>(x)[i];
    Vec<Out, V> b;
#pragma unroll
    for (int j = 0; j < V; ++j)
      b.v[j] = fn(a.v[j]);
    reinterpret_cast<Vec<Out, V> *>(y)[i] = b;
  }
  for (int64_t i = nv * V + globalThread(); i < n; i += globalThreads())
    y[i] = fn(x[i]);
}

/// Elements per vector access: 16 bytes of the wider type, at most 8.
template <typename A, typename B> constexpr int vectorWidth() {
  constexpr size_t wide = sizeof(A) > sizeof(B) ? sizeof(A) : sizeof(B);
  return wide >= 16 ? 1 : static_cast<int>(16 / wide > 8 ? 8 : 16 / wide);
}

template <typename In, typename Out, typename Fn>
KernelFn makeMap(const KernelSignature &sig, DeviceContext &ctx, int64_t n, Fn fn) {
  constexpr int V = vectorWidth<In, Out>();
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  return [c, name, n, fn](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    const In *x = static_cast<const In *>(call.inputs[0]);
    Out *y = static_cast<Out *>(call.outputs[0]);
    if (aligned(x, sizeof(In) * V) && aligned(y, sizeof(Out) * V))
      mapKernel<In, Out, V><<<gridFor(*c, (n + V - 1) / V), kThreads, 0, c->stream>>>(x, y, n, fn);
    else
      mapKernel<In, Out, 1><<<gridFor(*c, n), kThreads, 0, c->stream>>>(x, y, n, fn);
    return launchStatus(name);
  };
}

/// A device-to-device copy on the stream.
KernelFn makeCopy(DeviceContext &ctx, size_t bytes) {
  DeviceContext *c = &ctx;
  return [c, bytes](const KernelCall &call) -> Status {
    if (bytes == 0)
      return {};
    return cudaStatus(cudaMemcpyAsync(call.outputs[0], call.inputs[0], bytes,
                                      cudaMemcpyDeviceToDevice, c->stream),
                      "cudaMemcpyAsync");
  };
}

//===----------------------------------------------------------------------===//
// Unary.
//===----------------------------------------------------------------------===//

enum class Unary {
  Neg,
  Abs,
  Relu,
  Silu,
  Sigmoid,
  Tanh,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Erf,
  Not,
  Gelu,
  GeluTanh,
  Floor,
  Ceil,
  Round,
  Trunc,
  Sign,
  Log1p,
  Expm1,
  Tan,
  Asin,
  Acos,
  Atan,
  Sinh,
  Cosh,
  Asinh,
  Acosh,
  Atanh,
  Reciprocal
};

/// Ops that integers take too (no promotion to float).
constexpr bool takesIntegers(Unary op) {
  return op == Unary::Neg || op == Unary::Abs || op == Unary::Relu || op == Unary::Floor ||
         op == Unary::Ceil || op == Unary::Round || op == Unary::Trunc || op == Unary::Sign;
}

/// Two's complement negation without signed overflow.
template <typename T> __device__ __forceinline__ T wrapNeg(T v) {
  return static_cast<T>(-static_cast<std::make_unsigned_t<T>>(v));
}

template <Unary Op> __device__ __forceinline__ float floatUnary(float v) {
  if constexpr (Op == Unary::Neg)
    return -v;
  else if constexpr (Op == Unary::Abs)
    return fabsf(v);
  else if constexpr (Op == Unary::Relu)
    return v < 0.0f ? 0.0f : v; // NaN stays NaN, as torch.relu
  else if constexpr (Op == Unary::Silu)
    return v / (1.0f + expf(-v));
  else if constexpr (Op == Unary::Sigmoid)
    return 1.0f / (1.0f + expf(-v));
  else if constexpr (Op == Unary::Tanh)
    return tanhf(v);
  else if constexpr (Op == Unary::Exp)
    return expf(v);
  else if constexpr (Op == Unary::Log)
    return logf(v);
  else if constexpr (Op == Unary::Sqrt)
    return sqrtf(v);
  else if constexpr (Op == Unary::Rsqrt)
    return 1.0f / sqrtf(v);
  else if constexpr (Op == Unary::Sin)
    return sinf(v);
  else if constexpr (Op == Unary::Cos)
    return cosf(v);
  else if constexpr (Op == Unary::Erf)
    return erff(v);
  else if constexpr (Op == Unary::Gelu)
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  else if constexpr (Op == Unary::GeluTanh)
    return 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
  else if constexpr (Op == Unary::Floor)
    return floorf(v);
  else if constexpr (Op == Unary::Ceil)
    return ceilf(v);
  else if constexpr (Op == Unary::Round)
    return rintf(v); // halfway cases to even, as torch.round
  else if constexpr (Op == Unary::Trunc)
    return truncf(v);
  else if constexpr (Op == Unary::Sign)
    return static_cast<float>((0.0f < v) - (v < 0.0f)); // NaN and -0 give +0, as torch.sign
  else if constexpr (Op == Unary::Log1p)
    return log1pf(v);
  else if constexpr (Op == Unary::Expm1)
    return expm1f(v);
  else if constexpr (Op == Unary::Tan)
    return tanf(v);
  else if constexpr (Op == Unary::Asin)
    return asinf(v);
  else if constexpr (Op == Unary::Acos)
    return acosf(v);
  else if constexpr (Op == Unary::Atan)
    return atanf(v);
  else if constexpr (Op == Unary::Sinh)
    return sinhf(v);
  else if constexpr (Op == Unary::Cosh)
    return coshf(v);
  else if constexpr (Op == Unary::Asinh)
    return asinhf(v);
  else if constexpr (Op == Unary::Acosh)
    return acoshf(v);
  else if constexpr (Op == Unary::Atanh)
    return atanhf(v);
  else
    return 1.0f / v; // Reciprocal
}

template <Unary Op, typename T> struct UnaryFn {
  __device__ __forceinline__ T operator()(T x) const {
    if constexpr (Op == Unary::Not && std::is_same_v<T, Bool>)
      return x == 0;
    else if constexpr (Op == Unary::Not)
      return static_cast<T>(~x); // bitwise on integers
    else if constexpr (kIsFloat<T>)
      return store<T>(floatUnary<Op>(load(x)));
    else if constexpr (Op == Unary::Neg)
      return wrapNeg(x);
    else if constexpr (Op == Unary::Abs)
      return x < 0 ? wrapNeg(x) : x;
    else if constexpr (Op == Unary::Sign && std::is_same_v<T, Bool>)
      return x;
    else if constexpr (Op == Unary::Sign)
      return static_cast<T>((T(0) < x) - (x < T(0)));
    else if constexpr (Op == Unary::Floor || Op == Unary::Ceil || Op == Unary::Round ||
                       Op == Unary::Trunc)
      return x; // an integer rounds to itself
    else
      return x < 0 ? T(0) : x; // Relu
  }
};

template <Unary Op, typename T>
KernelFn makeUnary(const KernelSignature &sig, DeviceContext &ctx, int64_t n) {
  constexpr bool supported = Op == Unary::Not    ? !kIsFloat<T>
                             : Op == Unary::Sign  ? true
                             : takesIntegers(Op) ? !std::is_same_v<T, Bool>
                                                 : kIsFloat<T>;
  if constexpr (supported)
    return makeMap<T, T>(sig, ctx, n, UnaryFn<Op, T>{});
  else
    return nullptr; // never built: the dtype check rejects it first
}

template <Unary Op>
KernelFn unaryFor(const KernelSignature &sig, DeviceContext &ctx, DType dtype, int64_t n) {
  switch (dtype) {
  case DType::F32:
    return makeUnary<Op, float>(sig, ctx, n);
  case DType::BF16:
    return makeUnary<Op, bf16>(sig, ctx, n);
  case DType::I64:
    return makeUnary<Op, int64_t>(sig, ctx, n);
  case DType::I32:
    return makeUnary<Op, int32_t>(sig, ctx, n);
  default:
    return makeUnary<Op, Bool>(sig, ctx, n);
  }
}

template <Unary Op>
Status buildUnary(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  if constexpr (Op == Unary::Not)
    CLEAVE_RETURN_IF_ERROR(checkUnary(sig, "cuda", {DType::I1, DType::I64, DType::I32}));
  else if constexpr (Op == Unary::Sign)
    CLEAVE_RETURN_IF_ERROR(
        checkUnary(sig, "cuda", {DType::F32, DType::BF16, DType::I64, DType::I32, DType::I1}));
  else if constexpr (takesIntegers(Op))
    CLEAVE_RETURN_IF_ERROR(
        checkUnary(sig, "cuda", {DType::F32, DType::BF16, DType::I64, DType::I32}));
  else
    CLEAVE_RETURN_IF_ERROR(checkUnary(sig, "cuda", {DType::F32, DType::BF16}));
  const TensorDesc &in = *sig.inputs[0];
  const int64_t n = in.numel();
  if constexpr (Op == Unary::Gelu) {
    std::string approximation;
    CLEAVE_RETURN_IF_ERROR(
        withKernel(sig, sig.attrs.getString("approximation", &approximation, "none")));
    if (approximation == "tanh") {
      *fn = unaryFor<Unary::GeluTanh>(sig, ctx, in.dtype, n);
      return {};
    }
    if (approximation != "none")
      return CLEAVE_ERROR(sig.kernel, ": approximation '", approximation,
                          "' is neither 'none' nor 'tanh'");
  }
  *fn = unaryFor<Op>(sig, ctx, in.dtype, n);
  return {};
}

//===----------------------------------------------------------------------===//
// Binary ops, computed in Compute<T>.
//===----------------------------------------------------------------------===//

/// Integer arithmetic wraps on overflow, computed unsigned (defined behavior).
template <typename C, typename Fn> __device__ __forceinline__ C wrapping(C a, C b, Fn fn) {
  if constexpr (std::is_floating_point_v<C>) {
    return fn(a, b);
  } else {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(fn(static_cast<U>(a), static_cast<U>(b)));
  }
}

struct AddOp {
  template <typename C> __device__ __forceinline__ C operator()(C a, C b) const {
    return wrapping(a, b, [](auto x, auto y) { return x + y; });
  }
};
struct SubOp {
  template <typename C> __device__ __forceinline__ C operator()(C a, C b) const {
    return wrapping(a, b, [](auto x, auto y) { return x - y; });
  }
};
struct MulOp {
  template <typename C> __device__ __forceinline__ C operator()(C a, C b) const {
    return wrapping(a, b, [](auto x, auto y) { return static_cast<decltype(x)>(x * y); });
  }
};
struct DivOp {
  template <typename C> __device__ __forceinline__ C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>)
      return a / b;
    else
      // Truncating; x / 0 = 0 and MIN / -1 wraps instead of trapping.
      return b == 0 ? C(0) : b == -1 ? wrapNeg(a) : a / b;
  }
};
struct PowOp {
  // A square is exact (RMSNorm's x.pow(2)), as the CPU's fast path.
  __device__ __forceinline__ float operator()(float a, float b) const {
    return b == 2.0f ? a * a : powf(a, b);
  }
  // Integers: PyTorch's powi, wrapping; a negative exponent gives 1 for a
  // base of 1, ±1 for -1 and 0 otherwise.
  template <typename C> __device__ __forceinline__ C operator()(C a, C b) const {
    using U = std::make_unsigned_t<C>;
    if (b < 0)
      return a == 1 ? C(1) : a == -1 ? ((b & 1) ? C(-1) : C(1)) : C(0);
    U result = 1, base = static_cast<U>(a);
    for (U e = static_cast<U>(b); e; e >>= 1) {
      if (e & 1)
        result = static_cast<U>(result * base);
      base = static_cast<U>(base * base);
    }
    return static_cast<C>(result);
  }
};
struct MaxOp2 {
  template <typename C> __device__ __forceinline__ C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>)
      return ((a > b) | (a != a)) ? a : b; // NaN propagates, as torch.maximum
    else
      return a > b ? a : b;
  }
};
struct MinOp2 {
  template <typename C> __device__ __forceinline__ C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>)
      return ((a < b) | (a != a)) ? a : b;
    else
      return a < b ? a : b;
  }
};
struct AndOp {
  __device__ __forceinline__ Bool operator()(Bool a, Bool b) const { return (a != 0) & (b != 0); }
};
struct OrOp {
  __device__ __forceinline__ Bool operator()(Bool a, Bool b) const { return (a != 0) | (b != 0); }
};
struct XorOp {
  __device__ __forceinline__ Bool operator()(Bool a, Bool b) const { return (a != 0) != (b != 0); }
};
/// The bitwise forms of and, or and xor on integers.
template <typename Logical> struct Bitwise;
template <> struct Bitwise<AndOp> {
  template <typename C> __device__ __forceinline__ C operator()(C a, C b) const { return a & b; }
};
template <> struct Bitwise<OrOp> {
  template <typename C> __device__ __forceinline__ C operator()(C a, C b) const { return a | b; }
};
template <> struct Bitwise<XorOp> {
  template <typename C> __device__ __forceinline__ C operator()(C a, C b) const { return a ^ b; }
};
/// PyTorch's shifts: a count outside [0, bits) shifts every bit out.
struct ShiftLeftOp {
  template <typename C> __device__ __forceinline__ C operator()(C a, C b) const {
    using U = std::make_unsigned_t<C>;
    return (b < 0 || b >= C(sizeof(C) * 8)) ? C(0) : static_cast<C>(static_cast<U>(a) << b);
  }
};
struct ShiftRightOp {
  template <typename C> __device__ __forceinline__ C operator()(C a, C b) const {
    if (b < 0 || b >= C(sizeof(C) * 8))
      return a < 0 ? C(-1) : C(0);
    return static_cast<C>(a >> b);
  }
};
struct EqOp {
  template <typename C> __device__ __forceinline__ Bool operator()(C a, C b) const {
    return a == b;
  }
};
struct NeOp {
  template <typename C> __device__ __forceinline__ Bool operator()(C a, C b) const {
    return a != b;
  }
};
struct LtOp {
  template <typename C> __device__ __forceinline__ Bool operator()(C a, C b) const { return a < b; }
};
struct LeOp {
  template <typename C> __device__ __forceinline__ Bool operator()(C a, C b) const {
    return a <= b;
  }
};
struct GtOp {
  template <typename C> __device__ __forceinline__ Bool operator()(C a, C b) const { return a > b; }
};
struct GeOp {
  template <typename C> __device__ __forceinline__ Bool operator()(C a, C b) const {
    return a >= b;
  }
};

template <typename R, typename T, typename Op>
__device__ __forceinline__ R applyBinary(Op op, T a, T b) {
  return store<R>(op(load(a), load(b)));
}

/// Flat: out[i] = op(a[A ? i : 0], b[B ? i : 0]), vectorized over V.
template <typename T, typename R, typename Op, bool A, bool B, int V>
__global__ void flatBinaryKernel(const T *__restrict__ a, const T *__restrict__ b,
                                 R *__restrict__ out, int64_t n, Op op) {
  const int64_t nv = n / V;
  for (int64_t i = globalThread(); i < nv; i += globalThreads()) {
    Vec<T, V> va, vb;
    if constexpr (A) {
      va = reinterpret_cast<const Vec<T, V> *>(a)[i];
    } else {
      for (int j = 0; j < V; ++j)
        va.v[j] = a[0];
    }
    if constexpr (B) {
      vb = reinterpret_cast<const Vec<T, V> *>(b)[i];
    } else {
      for (int j = 0; j < V; ++j)
        vb.v[j] = b[0];
    }
    Vec<R, V> r;
#pragma unroll
    for (int j = 0; j < V; ++j)
      r.v[j] = applyBinary<R>(op, va.v[j], vb.v[j]);
    reinterpret_cast<Vec<R, V> *>(out)[i] = r;
  }
  for (int64_t i = nv * V + globalThread(); i < n; i += globalThreads())
    out[i] = applyBinary<R>(op, a[A ? i : 0], b[B ? i : 0]);
}

template <typename T, typename R, typename Op, typename I>
__global__ void broadcastBinaryKernel(const T *__restrict__ a, const T *__restrict__ b,
                                      R *__restrict__ out, DeviceLayout layout, int64_t n, Op op) {
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    I off[2];
    layoutOffsets<2>(layout, static_cast<I>(i), off);
    out[i] = applyBinary<R>(op, a[off[0]], b[off[1]]);
  }
}

template <typename T, typename R, typename Op, bool A, bool B>
void launchFlatBinary(DeviceContext *c, const T *a, const T *b, R *out, int64_t n, Op op) {
  constexpr int V = vectorWidth<T, R>();
  bool vec = aligned(out, sizeof(R) * V) && (!A || aligned(a, sizeof(T) * V)) &&
             (!B || aligned(b, sizeof(T) * V));
  if (vec)
    flatBinaryKernel<T, R, Op, A, B, V>
        <<<gridFor(*c, (n + V - 1) / V), kThreads, 0, c->stream>>>(a, b, out, n, op);
  else
    flatBinaryKernel<T, R, Op, A, B, 1>
        <<<gridFor(*c, n), kThreads, 0, c->stream>>>(a, b, out, n, op);
}

template <typename T, typename R, typename Op>
KernelFn makeBinary(const KernelSignature &sig, DeviceContext &ctx, const DeviceLayout &layout,
                    int64_t n, Op op = {}) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  // Flat when the coalesced layout is one dim (same shapes, or a scalar).
  const int64_t strideA = layout.strides[0][0], strideB = layout.strides[0][1];
  const bool flat =
      layout.rank == 1 && (strideA == 0 || strideA == 1) && (strideB == 0 || strideB == 1);
  const bool sa = strideA != 0, sb = strideB != 0;
  const bool narrow = fits32(layout, n);
  return [=](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    const T *a = static_cast<const T *>(call.inputs[0]);
    const T *b = static_cast<const T *>(call.inputs[1]);
    R *out = static_cast<R *>(call.outputs[0]);
    if (flat) {
      if (sa && sb)
        launchFlatBinary<T, R, Op, true, true>(c, a, b, out, n, op);
      else if (sa)
        launchFlatBinary<T, R, Op, true, false>(c, a, b, out, n, op);
      else if (sb)
        launchFlatBinary<T, R, Op, false, true>(c, a, b, out, n, op);
      else
        launchFlatBinary<T, R, Op, false, false>(c, a, b, out, n, op);
    } else if (narrow) {
      broadcastBinaryKernel<T, R, Op, int32_t>
          <<<gridFor(*c, n), kThreads, 0, c->stream>>>(a, b, out, layout, n, op);
    } else {
      broadcastBinaryKernel<T, R, Op, int64_t>
          <<<gridFor(*c, n), kThreads, 0, c->stream>>>(a, b, out, layout, n, op);
    }
    return launchStatus(name);
  };
}

/// parseBinary, with the layout on the device and the element count.
Status checkBinary(const KernelSignature &sig, std::initializer_list<DType> allowed,
                   std::optional<DType> resultType, DeviceLayout *layout, int64_t *n) {
  BroadcastLayout host;
  CLEAVE_RETURN_IF_ERROR(parseBinary(sig, "cuda", allowed, resultType, &host));
  *n = sig.outputs[0].numel();
  return toDevice(sig, host, layout);
}

/// What an arithmetic op means on bools, as PyTorch computes it (and as
/// the CPU backend): add and maximum are `or`, mul and minimum are `and`.
template <typename Op> struct OnBools { using type = void; };
template <> struct OnBools<AddOp> { using type = OrOp; };
template <> struct OnBools<MaxOp2> { using type = OrOp; };
template <> struct OnBools<MulOp> { using type = AndOp; };
template <> struct OnBools<MinOp2> { using type = AndOp; };

template <typename Op>
Status buildArithmetic(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  using BoolOp = typename OnBools<Op>::type;
  constexpr bool takesBools = !std::is_void_v<BoolOp>;
  DeviceLayout layout;
  int64_t n = 0;
  CLEAVE_RETURN_IF_ERROR(checkBinary(
      sig,
      takesBools ? std::initializer_list<DType>{DType::F32, DType::BF16, DType::I64, DType::I32,
                                                DType::I1}
                 : std::initializer_list<DType>{DType::F32, DType::BF16, DType::I64, DType::I32},
      std::nullopt, &layout, &n));
  if constexpr (takesBools) {
    if (sig.inputs[0]->dtype == DType::I1) {
      *fn = makeBinary<Bool, Bool, BoolOp>(sig, ctx, layout, n);
      return {};
    }
  }
  switch (sig.inputs[0]->dtype) {
  case DType::F32:
    *fn = makeBinary<float, float, Op>(sig, ctx, layout, n);
    return {};
  case DType::BF16:
    *fn = makeBinary<bf16, bf16, Op>(sig, ctx, layout, n);
    return {};
  case DType::I64:
    *fn = makeBinary<int64_t, int64_t, Op>(sig, ctx, layout, n);
    return {};
  default:
    *fn = makeBinary<int32_t, int32_t, Op>(sig, ctx, layout, n);
    return {};
  }
}

Status buildPow(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  DeviceLayout layout;
  int64_t n = 0;
  CLEAVE_RETURN_IF_ERROR(checkBinary(sig, {DType::F32, DType::BF16, DType::I64, DType::I32},
                                     std::nullopt, &layout, &n));
  if (sig.inputs[0]->dtype == DType::I64)
    *fn = makeBinary<int64_t, int64_t, PowOp>(sig, ctx, layout, n);
  else if (sig.inputs[0]->dtype == DType::I32)
    *fn = makeBinary<int32_t, int32_t, PowOp>(sig, ctx, layout, n);
  else if (sig.inputs[0]->dtype == DType::F32)
    *fn = makeBinary<float, float, PowOp>(sig, ctx, layout, n);
  else
    *fn = makeBinary<bf16, bf16, PowOp>(sig, ctx, layout, n);
  return {};
}

template <typename Op>
Status buildLogical(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  DeviceLayout layout;
  int64_t n = 0;
  CLEAVE_RETURN_IF_ERROR(
      checkBinary(sig, {DType::I1, DType::I64, DType::I32}, std::nullopt, &layout, &n));
  if (sig.inputs[0]->dtype == DType::I64)
    *fn = makeBinary<int64_t, int64_t, Bitwise<Op>>(sig, ctx, layout, n);
  else if (sig.inputs[0]->dtype == DType::I32)
    *fn = makeBinary<int32_t, int32_t, Bitwise<Op>>(sig, ctx, layout, n);
  else
    *fn = makeBinary<Bool, Bool, Op>(sig, ctx, layout, n);
  return {};
}

template <typename Op>
Status buildShift(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  DeviceLayout layout;
  int64_t n = 0;
  CLEAVE_RETURN_IF_ERROR(checkBinary(sig, {DType::I64, DType::I32}, std::nullopt, &layout, &n));
  if (sig.inputs[0]->dtype == DType::I64)
    *fn = makeBinary<int64_t, int64_t, Op>(sig, ctx, layout, n);
  else
    *fn = makeBinary<int32_t, int32_t, Op>(sig, ctx, layout, n);
  return {};
}

template <typename T>
Status makeCompare(const KernelSignature &sig, DeviceContext &ctx, const std::string &predicate,
                   const DeviceLayout &layout, int64_t n, KernelFn *fn) {
  if (predicate == "eq")
    *fn = makeBinary<T, Bool, EqOp>(sig, ctx, layout, n);
  else if (predicate == "ne")
    *fn = makeBinary<T, Bool, NeOp>(sig, ctx, layout, n);
  else if (predicate == "lt")
    *fn = makeBinary<T, Bool, LtOp>(sig, ctx, layout, n);
  else if (predicate == "le")
    *fn = makeBinary<T, Bool, LeOp>(sig, ctx, layout, n);
  else if (predicate == "gt")
    *fn = makeBinary<T, Bool, GtOp>(sig, ctx, layout, n);
  else if (predicate == "ge")
    *fn = makeBinary<T, Bool, GeOp>(sig, ctx, layout, n);
  else
    return CLEAVE_ERROR(sig.kernel, ": predicate '", predicate,
                        "' is not one of eq, ne, lt, le, gt, ge");
  return {};
}

Status buildCompare(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  DeviceLayout layout;
  int64_t n = 0;
  CLEAVE_RETURN_IF_ERROR(checkBinary(
      sig, {DType::F32, DType::BF16, DType::I64, DType::I32, DType::I1}, DType::I1, &layout, &n));
  std::string predicate;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getString("predicate", &predicate)));
  switch (sig.inputs[0]->dtype) {
  case DType::F32:
    return makeCompare<float>(sig, ctx, predicate, layout, n, fn);
  case DType::BF16:
    return makeCompare<bf16>(sig, ctx, predicate, layout, n, fn);
  case DType::I64:
    return makeCompare<int64_t>(sig, ctx, predicate, layout, n, fn);
  case DType::I32:
    return makeCompare<int32_t>(sig, ctx, predicate, layout, n, fn);
  default:
    return makeCompare<Bool>(sig, ctx, predicate, layout, n, fn);
  }
}

//===----------------------------------------------------------------------===//
// where(condition, on_true, on_false): moves bits, so by element size.
//===----------------------------------------------------------------------===//

template <typename T, typename I>
__global__ void whereKernel(const Bool *__restrict__ cond, const T *__restrict__ x,
                            const T *__restrict__ y, T *__restrict__ out, DeviceLayout layout,
                            int64_t n) {
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    I off[3];
    layoutOffsets<3>(layout, static_cast<I>(i), off);
    out[i] = cond[off[0]] ? x[off[1]] : y[off[2]];
  }
}

template <typename T>
KernelFn makeWhere(const KernelSignature &sig, DeviceContext &ctx, const DeviceLayout &layout,
                   int64_t n) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  const bool narrow = fits32(layout, n);
  return [=](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    const Bool *cond = static_cast<const Bool *>(call.inputs[0]);
    const T *x = static_cast<const T *>(call.inputs[1]);
    const T *y = static_cast<const T *>(call.inputs[2]);
    T *out = static_cast<T *>(call.outputs[0]);
    if (narrow)
      whereKernel<T, int32_t>
          <<<gridFor(*c, n), kThreads, 0, c->stream>>>(cond, x, y, out, layout, n);
    else
      whereKernel<T, int64_t>
          <<<gridFor(*c, n), kThreads, 0, c->stream>>>(cond, x, y, out, layout, n);
    return launchStatus(name);
  };
}

Status buildWhere(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  BroadcastLayout host;
  CLEAVE_RETURN_IF_ERROR(
      parseWhere(sig, "cuda", {DType::F32, DType::BF16, DType::I64, DType::I32, DType::I1}, &host));
  const TensorDesc &x = *sig.inputs[1];
  DeviceLayout layout;
  CLEAVE_RETURN_IF_ERROR(toDevice(sig, host, &layout));
  const int64_t n = sig.outputs[0].numel();
  byElementSize(dtypeBytes(x.dtype),
                [&](auto bits) { *fn = makeWhere<decltype(bits)>(sig, ctx, layout, n); });
  return {};
}

//===----------------------------------------------------------------------===//
// cast
//===----------------------------------------------------------------------===//

template <typename From, typename To> struct Convert {
  __device__ __forceinline__ To operator()(From v) const {
    if constexpr (std::is_same_v<To, Bool>)
      return load(v) != 0; // NaN is non-zero
    else if constexpr (std::is_same_v<From, Bool>)
      return store<To>(v != 0 ? 1 : 0);
    else if constexpr (std::is_same_v<To, bf16>)
      // Integers round through f32 (two roundings), as the CPU and PyTorch.
      return __float2bfloat16_rn(static_cast<float>(v));
    else if constexpr (std::is_integral_v<To> && !std::is_integral_v<From>)
      return truncateToInteger<To>(load(v)); // toward zero; NaN, out of range: the minimum
    else
      return static_cast<To>(load(v));
  }
};

template <typename From>
KernelFn makeCastFrom(const KernelSignature &sig, DeviceContext &ctx, DType to, int64_t n) {
  switch (to) {
  case DType::F32:
    return makeMap<From, float>(sig, ctx, n, Convert<From, float>{});
  case DType::BF16:
    return makeMap<From, bf16>(sig, ctx, n, Convert<From, bf16>{});
  case DType::I64:
    return makeMap<From, int64_t>(sig, ctx, n, Convert<From, int64_t>{});
  case DType::I32:
    return makeMap<From, int32_t>(sig, ctx, n, Convert<From, int32_t>{});
  default:
    return makeMap<From, Bool>(sig, ctx, n, Convert<From, Bool>{});
  }
}

Status buildCast(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  CLEAVE_RETURN_IF_ERROR(
      checkCast(sig, "cuda", {DType::F32, DType::BF16, DType::I64, DType::I32, DType::I1}));
  const TensorDesc &in = *sig.inputs[0];
  const TensorDesc &out = sig.outputs[0];
  const int64_t n = in.numel();
  if (in.dtype == out.dtype) {
    *fn = makeCopy(ctx, in.bytes());
    return {};
  }
  switch (in.dtype) {
  case DType::F32:
    *fn = makeCastFrom<float>(sig, ctx, out.dtype, n);
    return {};
  case DType::BF16:
    *fn = makeCastFrom<bf16>(sig, ctx, out.dtype, n);
    return {};
  case DType::I64:
    *fn = makeCastFrom<int64_t>(sig, ctx, out.dtype, n);
    return {};
  case DType::I32:
    *fn = makeCastFrom<int32_t>(sig, ctx, out.dtype, n);
    return {};
  default:
    *fn = makeCastFrom<Bool>(sig, ctx, out.dtype, n);
    return {};
  }
}

//===----------------------------------------------------------------------===//
// tril / triu: they move bits only, so every dtype works (zero is all-zero
// bits).
//===----------------------------------------------------------------------===//

template <typename T, bool Lower>
__global__ void triangleKernel(const T *__restrict__ x, T *__restrict__ y, int64_t n, int64_t rows,
                               int64_t cols, int64_t diagonal) {
  for (int64_t k = globalThread(); k < n; k += globalThreads()) {
    const int64_t r = k / cols, j = k - r * cols, i = r % rows;
    const bool keep = Lower ? j - i <= diagonal : j - i >= diagonal;
    y[k] = keep ? x[k] : T(0);
  }
}

template <typename T, bool Lower>
KernelFn makeTriangle(const KernelSignature &sig, DeviceContext &ctx, int64_t n, int64_t rows,
                      int64_t cols, int64_t diagonal) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  return [=](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    triangleKernel<T, Lower><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<T *>(call.outputs[0]), n, rows, cols,
        diagonal);
    return launchStatus(name);
  };
}

template <bool Lower>
Status buildTriangle(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  TriangleParams tp;
  CLEAVE_RETURN_IF_ERROR(parseTriangle(sig, &tp));
  const TensorDesc &in = *sig.inputs[0];
  const int64_t rows = tp.rows, cols = tp.cols, diagonal = tp.diagonal;
  const int64_t n = in.numel();
  byElementSize(dtypeBytes(in.dtype), [&](auto bits) {
    *fn = makeTriangle<decltype(bits), Lower>(sig, ctx, n, rows, cols, diagonal);
  });
  return {};
}

} // namespace

void registerElementwiseKernels(KernelTable &table) {
  table["neg"] = buildUnary<Unary::Neg>;
  table["abs"] = buildUnary<Unary::Abs>;
  table["relu"] = buildUnary<Unary::Relu>;
  table["silu"] = buildUnary<Unary::Silu>;
  table["sigmoid"] = buildUnary<Unary::Sigmoid>;
  table["tanh"] = buildUnary<Unary::Tanh>;
  table["exp"] = buildUnary<Unary::Exp>;
  table["log"] = buildUnary<Unary::Log>;
  table["sqrt"] = buildUnary<Unary::Sqrt>;
  table["rsqrt"] = buildUnary<Unary::Rsqrt>;
  table["sin"] = buildUnary<Unary::Sin>;
  table["cos"] = buildUnary<Unary::Cos>;
  table["erf"] = buildUnary<Unary::Erf>;
  table["not"] = buildUnary<Unary::Not>;
  table["gelu"] = buildUnary<Unary::Gelu>;
  table["floor"] = buildUnary<Unary::Floor>;
  table["ceil"] = buildUnary<Unary::Ceil>;
  table["round"] = buildUnary<Unary::Round>;
  table["trunc"] = buildUnary<Unary::Trunc>;
  table["sign"] = buildUnary<Unary::Sign>;
  table["log1p"] = buildUnary<Unary::Log1p>;
  table["expm1"] = buildUnary<Unary::Expm1>;
  table["tan"] = buildUnary<Unary::Tan>;
  table["asin"] = buildUnary<Unary::Asin>;
  table["acos"] = buildUnary<Unary::Acos>;
  table["atan"] = buildUnary<Unary::Atan>;
  table["sinh"] = buildUnary<Unary::Sinh>;
  table["cosh"] = buildUnary<Unary::Cosh>;
  table["asinh"] = buildUnary<Unary::Asinh>;
  table["acosh"] = buildUnary<Unary::Acosh>;
  table["atanh"] = buildUnary<Unary::Atanh>;
  table["reciprocal"] = buildUnary<Unary::Reciprocal>;
  table["add"] = buildArithmetic<AddOp>;
  table["sub"] = buildArithmetic<SubOp>;
  table["mul"] = buildArithmetic<MulOp>;
  table["div"] = buildArithmetic<DivOp>;
  table["maximum"] = buildArithmetic<MaxOp2>;
  table["minimum"] = buildArithmetic<MinOp2>;
  table["pow"] = buildPow;
  table["and"] = buildLogical<AndOp>;
  table["or"] = buildLogical<OrOp>;
  table["xor"] = buildLogical<XorOp>;
  table["shift_left"] = buildShift<ShiftLeftOp>;
  table["shift_right"] = buildShift<ShiftRightOp>;
  table["compare"] = buildCompare;
  table["where"] = buildWhere;
  table["cast"] = buildCast;
  table["tril"] = buildTriangle<true>;
  table["triu"] = buildTriangle<false>;
}

} // namespace cleave::runtime::cuda
