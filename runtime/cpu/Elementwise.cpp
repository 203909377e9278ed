//===- Elementwise.cpp - Unary, binary, compare, where, cast, tril/triu ---===//
//
// Float math runs through VecMath.h so that the loops vectorize; the float
// unary loops are multi-versioned (CLEAVE_CLONES in Common.h).
//
// Integer `div` truncates toward zero (C semantics, PyTorch's
// rounding_mode='trunc'); an integer division by zero gives 0 instead of
// trapping.
//
//===----------------------------------------------------------------------===//

#include "runtime/BFloat16.h"
#include "runtime/Float16.h"
#include "runtime/KernelParams.h"
#include "runtime/cpu/Common.h"
#include "runtime/cpu/Registry.h"
#include "runtime/cpu/VecMath.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>


namespace cleave::runtime::cpu {
namespace {

//===----------------------------------------------------------------------===//
// Unary.
//===----------------------------------------------------------------------===//

using FloatLoop = void (*)(const float *, float *, int64_t);

#define CLEAVE_FLOAT_UNARY(name, expr)                                         \
  CLEAVE_CLONES void name(const float *__restrict x, float *__restrict y,      \
                          int64_t n) {                                         \
    for (int64_t i = 0; i < n; ++i) {                                          \
      float v = x[i];                                                          \
      y[i] = (expr);                                                           \
    }                                                                          \
  }

CLEAVE_FLOAT_UNARY(negF32, -v)
CLEAVE_FLOAT_UNARY(absF32, std::fabs(v))
// NaN stays NaN, as torch.relu.
CLEAVE_FLOAT_UNARY(reluF32, v < 0.0f ? 0.0f : v)
CLEAVE_FLOAT_UNARY(siluF32, v / (1.0f + vmath::exp(-v)))
CLEAVE_FLOAT_UNARY(sigmoidF32, vmath::sigmoid(v))
CLEAVE_FLOAT_UNARY(tanhF32, vmath::tanh(v))
CLEAVE_FLOAT_UNARY(expF32, vmath::exp(v))
CLEAVE_FLOAT_UNARY(logF32, std::log(v))
CLEAVE_FLOAT_UNARY(sqrtF32, std::sqrt(v))
CLEAVE_FLOAT_UNARY(rsqrtF32, 1.0f / std::sqrt(v))
CLEAVE_FLOAT_UNARY(sinF32, std::sin(v))
CLEAVE_FLOAT_UNARY(cosF32, std::cos(v))
CLEAVE_FLOAT_UNARY(erfF32, vmath::erf(v))
// std::nearbyint rounds halfway cases to even under the default rounding mode,
// as torch.round; std::round would take them away from zero.
CLEAVE_FLOAT_UNARY(floorF32, std::floor(v))
CLEAVE_FLOAT_UNARY(ceilF32, std::ceil(v))
CLEAVE_FLOAT_UNARY(roundF32, std::nearbyint(v))
CLEAVE_FLOAT_UNARY(truncF32, std::trunc(v))
// NaN and -0 give +0, as torch.sign.
CLEAVE_FLOAT_UNARY(signF32, static_cast<float>((0.0f < v) - (v < 0.0f)))
CLEAVE_FLOAT_UNARY(log1pF32, std::log1p(v))
CLEAVE_FLOAT_UNARY(expm1F32, std::expm1(v))
CLEAVE_FLOAT_UNARY(tanF32, std::tan(v))
CLEAVE_FLOAT_UNARY(asinF32, std::asin(v))
CLEAVE_FLOAT_UNARY(acosF32, std::acos(v))
CLEAVE_FLOAT_UNARY(atanF32, std::atan(v))
CLEAVE_FLOAT_UNARY(sinhF32, std::sinh(v))
CLEAVE_FLOAT_UNARY(coshF32, std::cosh(v))
CLEAVE_FLOAT_UNARY(asinhF32, std::asinh(v))
CLEAVE_FLOAT_UNARY(acoshF32, std::acosh(v))
CLEAVE_FLOAT_UNARY(atanhF32, std::atanh(v))
CLEAVE_FLOAT_UNARY(reciprocalF32, 1.0f / v)
CLEAVE_FLOAT_UNARY(geluErfF32, 0.5f * v * (1.0f + vmath::erf(v * 0.70710678118654752f)))
CLEAVE_FLOAT_UNARY(geluTanhF32,
                   0.5f * v *
                       (1.0f + vmath::tanh(0.79788456080286536f *
                                           (v + 0.044715f * v * v * v))))

enum class Unary {
  Neg, Abs, Relu, Silu, Sigmoid, Tanh, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Erf, Not, Gelu,
  Floor, Ceil, Round, Trunc, Sign, Log1p, Expm1, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh,
  Acosh, Atanh, Reciprocal
};

/// Ops that integers take too (no promotion to float).
constexpr bool takesIntegers(Unary op) {
  return op == Unary::Neg || op == Unary::Abs || op == Unary::Relu || op == Unary::Floor ||
         op == Unary::Ceil || op == Unary::Round || op == Unary::Trunc || op == Unary::Sign;
}

template <typename T> void negInt(const T *x, T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<T>(-static_cast<std::make_unsigned_t<T>>(x[i]));
}
template <typename T> void absInt(const T *x, T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] < 0 ? static_cast<T>(-static_cast<std::make_unsigned_t<T>>(x[i])) : x[i];
}
template <typename T> void reluInt(const T *x, T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] < 0 ? T(0) : x[i];
}
template <typename T> void signInt(const T *x, T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<T>((T(0) < x[i]) - (x[i] < T(0)));
}
/// Rounding an integer, or the sign of a bool: the value itself.
template <typename T> void copyElements(const T *x, T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i];
}
void notBool(const Bool *x, Bool *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] == 0;
}
template <typename T> void notInt(const T *x, T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<T>(~x[i]);
}

/// A flat loop over n elements, split across threads.
template <typename In, typename Out, typename Loop>
KernelFn flatUnary(int64_t n, int64_t cost, Loop loop) {
  return [n, cost, loop](const KernelCall &call) -> Status {
    const In *x = static_cast<const In *>(call.inputs[0]);
    Out *y = static_cast<Out *>(call.outputs[0]);
    parallelRange(n, cost, [&](int64_t b, int64_t e) { loop(x + b, y + b, e - b); });
    return {};
  };
}

template <typename T> KernelFn intUnary(Unary op, int64_t n) {
  switch (op) {
  case Unary::Neg:
    return flatUnary<T, T>(n, 1, negInt<T>);
  case Unary::Abs:
    return flatUnary<T, T>(n, 1, absInt<T>);
  case Unary::Sign:
    return flatUnary<T, T>(n, 1, signInt<T>);
  case Unary::Floor:
  case Unary::Ceil:
  case Unary::Round:
  case Unary::Trunc:
    return flatUnary<T, T>(n, 1, copyElements<T>);
  default:
    return flatUnary<T, T>(n, 1, reluInt<T>);
  }
}

template <Unary Op> Status buildUnary(const KernelSignature &sig, KernelFn *fn) {
  if constexpr (Op == Unary::Not)
    CLEAVE_RETURN_IF_ERROR(checkUnary(sig, "cpu", {DType::I1, DType::I64, DType::I32}));
  else if constexpr (Op == Unary::Sign)
    CLEAVE_RETURN_IF_ERROR(
        checkUnary(sig, "cpu", {DType::F32, DType::I64, DType::I32, DType::I1}));
  else if constexpr (takesIntegers(Op))
    CLEAVE_RETURN_IF_ERROR(checkUnary(sig, "cpu", {DType::F32, DType::I64, DType::I32}));
  else
    CLEAVE_RETURN_IF_ERROR(checkUnary(sig, "cpu", {DType::F32}));
  const TensorDesc &in = *sig.inputs[0];
  const int64_t n = in.numel();

  FloatLoop loop = nullptr;
  int64_t cost = 1;
  switch (Op) {
  case Unary::Neg: loop = negF32; break;
  case Unary::Abs: loop = absF32; break;
  case Unary::Relu: loop = reluF32; break;
  case Unary::Silu: loop = siluF32; cost = 8; break;
  case Unary::Sigmoid: loop = sigmoidF32; cost = 8; break;
  case Unary::Tanh: loop = tanhF32; cost = 8; break;
  case Unary::Exp: loop = expF32; cost = 8; break;
  case Unary::Log: loop = logF32; cost = 16; break;
  case Unary::Sqrt: loop = sqrtF32; cost = 2; break;
  case Unary::Rsqrt: loop = rsqrtF32; cost = 2; break;
  case Unary::Sin: loop = sinF32; cost = 16; break;
  case Unary::Cos: loop = cosF32; cost = 16; break;
  case Unary::Erf: loop = erfF32; cost = 8; break;
  case Unary::Floor: loop = floorF32; break;
  case Unary::Ceil: loop = ceilF32; break;
  case Unary::Round: loop = roundF32; break;
  case Unary::Trunc: loop = truncF32; break;
  case Unary::Sign: loop = signF32; break;
  case Unary::Log1p: loop = log1pF32; cost = 16; break;
  case Unary::Expm1: loop = expm1F32; cost = 16; break;
  case Unary::Tan: loop = tanF32; cost = 16; break;
  case Unary::Asin: loop = asinF32; cost = 16; break;
  case Unary::Acos: loop = acosF32; cost = 16; break;
  case Unary::Atan: loop = atanF32; cost = 16; break;
  case Unary::Sinh: loop = sinhF32; cost = 16; break;
  case Unary::Cosh: loop = coshF32; cost = 16; break;
  case Unary::Asinh: loop = asinhF32; cost = 16; break;
  case Unary::Acosh: loop = acoshF32; cost = 16; break;
  case Unary::Atanh: loop = atanhF32; cost = 16; break;
  case Unary::Reciprocal: loop = reciprocalF32; cost = 2; break;
  case Unary::Gelu: {
    std::string approximation;
    CLEAVE_RETURN_IF_ERROR(
        withKernel(sig, sig.attrs.getString("approximation", &approximation, "none")));
    if (approximation == "none")
      loop = geluErfF32;
    else if (approximation == "tanh")
      loop = geluTanhF32;
    else
      return CLEAVE_ERROR(sig.kernel, ": approximation '", approximation,
                          "' is neither 'none' nor 'tanh'");
    cost = 8;
    break;
  }
  case Unary::Not: // logical on bools, bitwise on integers
    if (in.dtype == DType::I64)
      *fn = flatUnary<int64_t, int64_t>(n, 1, notInt<int64_t>);
    else if (in.dtype == DType::I32)
      *fn = flatUnary<int32_t, int32_t>(n, 1, notInt<int32_t>);
    else
      *fn = flatUnary<Bool, Bool>(n, 1, notBool);
    return {};
  }
  switch (in.dtype) {
  case DType::F32:
    *fn = flatUnary<float, float>(n, cost, loop);
    return {};
  case DType::I64:
    *fn = intUnary<int64_t>(Op, n);
    return {};
  case DType::I32:
    *fn = intUnary<int32_t>(Op, n);
    return {};
  case DType::I1:
    *fn = flatUnary<Bool, Bool>(n, 1, copyElements<Bool>); // sign
    return {};
  default:
    return noKernelFor(sig.kernel, in.dtype);
  }
}

//===----------------------------------------------------------------------===//
// Binary with broadcasting.
//===----------------------------------------------------------------------===//

/// Integer arithmetic wraps on overflow (as PyTorch's), computed unsigned so
/// that it is defined behavior.
template <typename T, typename Fn> T wrapping(T a, T b, Fn fn) {
  if constexpr (std::is_floating_point_v<T>) {
    return fn(a, b);
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(fn(static_cast<U>(a), static_cast<U>(b)));
  }
}
struct AddOp {
  template <typename T> static T apply(T a, T b) {
    return wrapping(a, b, [](auto x, auto y) { return x + y; });
  }
};
struct SubOp {
  template <typename T> static T apply(T a, T b) {
    return wrapping(a, b, [](auto x, auto y) { return x - y; });
  }
};
struct MulOp {
  template <typename T> static T apply(T a, T b) {
    return wrapping(a, b, [](auto x, auto y) { return static_cast<decltype(x)>(x * y); });
  }
};
struct DivOp {
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
      return a / b;
    else
      // Truncating; x / 0 = 0 and MIN / -1 wraps instead of trapping.
      return b == 0 ? T(0) : b == -1 ? static_cast<T>(-static_cast<std::make_unsigned_t<T>>(a)) : a / b;
  }
};
/// Integer powers are PyTorch's `powi`: repeated squaring that wraps on
/// overflow; a negative exponent gives 1 for a base of 1, ±1 for -1 (by the
/// exponent's parity) and 0 otherwise (the truncated 1 / base^-e).
template <typename T> T integerPow(T base, T exponent) {
  using U = std::make_unsigned_t<T>;
  if (exponent < 0) {
    if (base == 1)
      return 1;
    if (base == -1)
      return (exponent & 1) ? T(-1) : T(1);
    return 0;
  }
  U result = 1, b = static_cast<U>(base);
  for (U e = static_cast<U>(exponent); e; e >>= 1) {
    if (e & 1)
      result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
  }
  return static_cast<T>(result);
}
struct PowOp {
  static float apply(float a, float b) { return std::pow(a, b); }
  template <typename T> static T apply(T a, T b) { return integerPow(a, b); }
};
struct MaxOp {
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
      return ((a > b) | (a != a)) ? a : b; // NaN propagates, as torch.maximum
    else
      return a > b ? a : b;
  }
};
struct MinOp {
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
      return ((a < b) | (a != a)) ? a : b;
    else
      return a < b ? a : b;
  }
};
struct AndOp { static Bool apply(Bool a, Bool b) { return (a != 0) & (b != 0); } };
struct OrOp { static Bool apply(Bool a, Bool b) { return (a != 0) | (b != 0); } };
struct XorOp { static Bool apply(Bool a, Bool b) { return (a != 0) != (b != 0); } };
/// The bitwise forms of and, or and xor on integers.
template <typename Logical> struct Bitwise;
template <> struct Bitwise<AndOp> {
  template <typename T> static T apply(T a, T b) { return a & b; }
};
template <> struct Bitwise<OrOp> {
  template <typename T> static T apply(T a, T b) { return a | b; }
};
template <> struct Bitwise<XorOp> {
  template <typename T> static T apply(T a, T b) { return a ^ b; }
};
/// PyTorch's shifts: a count outside [0, bits) shifts every bit out, so a
/// left shift gives 0 and an arithmetic right shift the sign (0 or -1).
struct ShiftLeftOp {
  template <typename T> static T apply(T a, T b) {
    using U = std::make_unsigned_t<T>;
    if (b < 0 || b >= T(sizeof(T) * 8))
      return 0;
    return static_cast<T>(static_cast<U>(a) << b);
  }
};
struct ShiftRightOp {
  template <typename T> static T apply(T a, T b) {
    if (b < 0 || b >= T(sizeof(T) * 8))
      return a < 0 ? T(-1) : T(0);
    return static_cast<T>(a >> b);
  }
};
struct EqOp { template <typename T> static Bool apply(T a, T b) { return a == b; } };
struct NeOp { template <typename T> static Bool apply(T a, T b) { return a != b; } };
struct LtOp { template <typename T> static Bool apply(T a, T b) { return a < b; } };
struct LeOp { template <typename T> static Bool apply(T a, T b) { return a <= b; } };
struct GtOp { template <typename T> static Bool apply(T a, T b) { return a > b; } };
struct GeOp { template <typename T> static Bool apply(T a, T b) { return a >= b; } };

/// One span: a and b advance by 1 (true) or stay (false).
template <typename T, typename R, typename Op, bool A, bool B>
void binarySpan(const T *__restrict a, const T *__restrict b, R *__restrict out, int64_t n) {
  if constexpr (!A && B) {
    const T av = a[0];
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op::apply(av, b[i]);
  } else if constexpr (A && !B) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op::apply(a[i], bv);
  } else if constexpr (A && B) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op::apply(a[i], b[i]);
  } else {
    const R v = Op::apply(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i)
      out[i] = v;
  }
}

/// The same, multi-versioned, for the float ops of transformers and CNNs
/// (residual adds, bias rows, scalings): a wider ISA pays off on data that
/// sits in cache.
template <typename Op, bool A, bool B>
CLEAVE_CLONES void floatBinarySpan(const float *__restrict a, const float *__restrict b,
                                   float *__restrict out, int64_t n) {
  binarySpan<float, float, Op, A, B>(a, b, out, n);
}

template <typename T, typename R, typename Op, bool A, bool B>
void span(const T *a, const T *b, R *out, int64_t n) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<R, float> && (A || B))
    floatBinarySpan<Op, A, B>(a, b, out, n);
  else
    binarySpan<T, R, Op, A, B>(a, b, out, n);
}

template <typename T, typename R, typename Op>
KernelFn makeBinary(const BroadcastLayout &layout) {
  return [layout](const KernelCall &call) -> Status {
    const T *a = static_cast<const T *>(call.inputs[0]);
    const T *b = static_cast<const T *>(call.inputs[1]);
    R *out = static_cast<R *>(call.outputs[0]);
    const bool sa = layout.innerStride(0) != 0, sb = layout.innerStride(1) != 0;
    forEachSpan(layout, [&](const std::array<int64_t, kMaxOperands> &off, int64_t pos,
                            int64_t len) {
      const T *pa = a + off[0], *pb = b + off[1];
      R *po = out + pos;
      if (sa && sb)
        span<T, R, Op, true, true>(pa, pb, po, len);
      else if (sa)
        span<T, R, Op, true, false>(pa, pb, po, len);
      else if (sb)
        span<T, R, Op, false, true>(pa, pb, po, len);
      else
        span<T, R, Op, false, false>(pa, pb, po, len);
    });
    return {};
  };
}

/// What an arithmetic op means on bools, as PyTorch computes it: add and
/// maximum are `or`, mul and minimum are `and`; sub and div have none
/// (PyTorch refuses a bool sub and divides bools as floats).
template <typename Op> struct OnBools { using type = void; };
template <> struct OnBools<AddOp> { using type = OrOp; };
template <> struct OnBools<MaxOp> { using type = OrOp; };
template <> struct OnBools<MulOp> { using type = AndOp; };
template <> struct OnBools<MinOp> { using type = AndOp; };

template <typename Op> Status buildArithmetic(const KernelSignature &sig, KernelFn *fn) {
  using BoolOp = typename OnBools<Op>::type;
  constexpr bool takesBools = !std::is_void_v<BoolOp>;
  BroadcastLayout layout;
  CLEAVE_RETURN_IF_ERROR(parseBinary(
      sig, "cpu",
      takesBools ? std::initializer_list<DType>{DType::F32, DType::I64, DType::I32, DType::I1}
                 : std::initializer_list<DType>{DType::F32, DType::I64, DType::I32},
      std::nullopt, &layout));
  if constexpr (takesBools) {
    if (sig.inputs[0]->dtype == DType::I1) {
      *fn = makeBinary<Bool, Bool, BoolOp>(layout);
      return {};
    }
  }
  switch (sig.inputs[0]->dtype) {
  case DType::F32:
    *fn = makeBinary<float, float, Op>(layout);
    return {};
  case DType::I64:
    *fn = makeBinary<int64_t, int64_t, Op>(layout);
    return {};
  case DType::I32:
    *fn = makeBinary<int32_t, int32_t, Op>(layout);
    return {};
  default:
    return noKernelFor(sig.kernel, sig.inputs[0]->dtype);
  }
}

Status buildPow(const KernelSignature &sig, KernelFn *fn) {
  BroadcastLayout layout;
  CLEAVE_RETURN_IF_ERROR(
      parseBinary(sig, "cpu", {DType::F32, DType::I64, DType::I32}, std::nullopt, &layout));
  if (sig.inputs[0]->dtype == DType::I64) {
    *fn = makeBinary<int64_t, int64_t, PowOp>(layout);
    return {};
  }
  if (sig.inputs[0]->dtype == DType::I32) {
    *fn = makeBinary<int32_t, int32_t, PowOp>(layout);
    return {};
  }
  KernelFn general = makeBinary<float, float, PowOp>(layout);
  if (sig.inputs[1]->numel() != 1) {
    *fn = general;
    return {};
  }
  // A scalar exponent of 2 (RMSNorm's x.pow(2)) is a square.
  int64_t n = sig.outputs[0].numel();
  bool sameShape = sig.inputs[0]->numel() == n;
  *fn = [general, n, sameShape](const KernelCall &call) -> Status {
    float e = *static_cast<const float *>(call.inputs[1]);
    if (e != 2.0f || !sameShape)
      return general(call);
    const float *x = static_cast<const float *>(call.inputs[0]);
    float *y = static_cast<float *>(call.outputs[0]);
    parallelRange(n, 1, [&](int64_t b, int64_t end) {
      for (int64_t i = b; i < end; ++i)
        y[i] = x[i] * x[i];
    });
    return {};
  };
  return {};
}

/// and, or, xor: logical on bools, bitwise on integers.
template <typename Op> Status buildLogical(const KernelSignature &sig, KernelFn *fn) {
  BroadcastLayout layout;
  CLEAVE_RETURN_IF_ERROR(
      parseBinary(sig, "cpu", {DType::I1, DType::I64, DType::I32}, std::nullopt, &layout));
  switch (sig.inputs[0]->dtype) {
  case DType::I64:
    *fn = makeBinary<int64_t, int64_t, Bitwise<Op>>(layout);
    return {};
  case DType::I32:
    *fn = makeBinary<int32_t, int32_t, Bitwise<Op>>(layout);
    return {};
  default:
    *fn = makeBinary<Bool, Bool, Op>(layout);
    return {};
  }
}

template <typename Op> Status buildShift(const KernelSignature &sig, KernelFn *fn) {
  BroadcastLayout layout;
  CLEAVE_RETURN_IF_ERROR(parseBinary(sig, "cpu", {DType::I64, DType::I32}, std::nullopt, &layout));
  if (sig.inputs[0]->dtype == DType::I64)
    *fn = makeBinary<int64_t, int64_t, Op>(layout);
  else
    *fn = makeBinary<int32_t, int32_t, Op>(layout);
  return {};
}

template <typename T>
Status makeCompare(const KernelSignature &sig, const std::string &predicate, const BroadcastLayout &layout, KernelFn *fn) {
  if (predicate == "eq")
    *fn = makeBinary<T, Bool, EqOp>(layout);
  else if (predicate == "ne")
    *fn = makeBinary<T, Bool, NeOp>(layout);
  else if (predicate == "lt")
    *fn = makeBinary<T, Bool, LtOp>(layout);
  else if (predicate == "le")
    *fn = makeBinary<T, Bool, LeOp>(layout);
  else if (predicate == "gt")
    *fn = makeBinary<T, Bool, GtOp>(layout);
  else if (predicate == "ge")
    *fn = makeBinary<T, Bool, GeOp>(layout);
  else
    return CLEAVE_ERROR(sig.kernel, ": predicate '", predicate,
                        "' is not one of eq, ne, lt, le, gt, ge");
  return {};
}

Status buildCompare(const KernelSignature &sig, KernelFn *fn) {
  BroadcastLayout layout;
  CLEAVE_RETURN_IF_ERROR(parseBinary(sig, "cpu", {DType::F32, DType::I64, DType::I32, DType::I1},
                                     DType::I1, &layout));
  std::string predicate;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getString("predicate", &predicate)));
  switch (sig.inputs[0]->dtype) {
  case DType::F32:
    return makeCompare<float>(sig, predicate, layout, fn);
  case DType::I64:
    return makeCompare<int64_t>(sig, predicate, layout, fn);
  case DType::I32:
    return makeCompare<int32_t>(sig, predicate, layout, fn);
  case DType::I1:
    return makeCompare<Bool>(sig, predicate, layout, fn);
  default:
    return noKernelFor(sig.kernel, sig.inputs[0]->dtype);
  }
}

//===----------------------------------------------------------------------===//
// where(condition, on_true, on_false).
//===----------------------------------------------------------------------===//

template <typename T, bool C, bool X, bool Y>
void whereLoop(const Bool *__restrict c, const T *__restrict x, const T *__restrict y,
               T *__restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    // Both loads unconditionally, so that the select vectorizes.
    const T xv = x[X ? i : 0], yv = y[Y ? i : 0];
    out[i] = c[C ? i : 0] ? xv : yv;
  }
}

/// Float where (attention masking) is multi-versioned.
template <bool C, bool X, bool Y>
CLEAVE_CLONES void floatWhereLoop(const Bool *__restrict c, const float *__restrict x,
                                  const float *__restrict y, float *__restrict out, int64_t n) {
  whereLoop<float, C, X, Y>(c, x, y, out, n);
}

template <typename T, bool C, bool X, bool Y>
void whereSpan(const Bool *c, const T *x, const T *y, T *out, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    floatWhereLoop<C, X, Y>(c, x, y, out, n);
  else
    whereLoop<T, C, X, Y>(c, x, y, out, n);
}

template <typename T, bool C, bool X, bool Y> constexpr auto whereSpanPtr() {
  return &whereSpan<T, C, X, Y>;
}

template <typename T> KernelFn makeWhere(const BroadcastLayout &layout) {
  using SpanFn = void (*)(const Bool *, const T *, const T *, T *, int64_t);
  static constexpr SpanFn spans[8] = {
      whereSpanPtr<T, false, false, false>(), whereSpanPtr<T, false, false, true>(),
      whereSpanPtr<T, false, true, false>(),  whereSpanPtr<T, false, true, true>(),
      whereSpanPtr<T, true, false, false>(),  whereSpanPtr<T, true, false, true>(),
      whereSpanPtr<T, true, true, false>(),   whereSpanPtr<T, true, true, true>()};
  int code = (layout.innerStride(0) != 0) * 4 + (layout.innerStride(1) != 0) * 2 +
             (layout.innerStride(2) != 0);
  SpanFn span = spans[code];
  return [layout, span](const KernelCall &call) -> Status {
    const Bool *c = static_cast<const Bool *>(call.inputs[0]);
    const T *x = static_cast<const T *>(call.inputs[1]);
    const T *y = static_cast<const T *>(call.inputs[2]);
    T *out = static_cast<T *>(call.outputs[0]);
    forEachSpan(layout, [&](const std::array<int64_t, kMaxOperands> &off, int64_t pos,
                            int64_t len) {
      span(c + off[0], x + off[1], y + off[2], out + pos, len);
    });
    return {};
  };
}

Status buildWhere(const KernelSignature &sig, KernelFn *fn) {
  BroadcastLayout layout;
  CLEAVE_RETURN_IF_ERROR(
      parseWhere(sig, "cpu", {DType::F32, DType::I64, DType::I32, DType::I1}, &layout));
  const TensorDesc &x = *sig.inputs[1];
  switch (x.dtype) {
  case DType::F32:
    *fn = makeWhere<float>(layout);
    return {};
  case DType::I64:
    *fn = makeWhere<int64_t>(layout);
    return {};
  case DType::I32:
    *fn = makeWhere<int32_t>(layout);
    return {};
  case DType::I1:
    *fn = makeWhere<Bool>(layout);
    return {};
  default:
    return noKernelFor(sig.kernel, x.dtype);
  }
}

//===----------------------------------------------------------------------===//
// cast.
//===----------------------------------------------------------------------===//

/// A bf16 element, as its bits; cast converts through f32 (runtime/BFloat16.h).
struct Bf16 {
  uint16_t bits;
};

/// An f16 element, as its bits; cast converts through f32 (runtime/Float16.h).
struct F16 {
  uint16_t bits;
};

template <typename From, typename To> To convert(From v) {
  if constexpr (std::is_same_v<From, Bf16>)
    return convert<float, To>(bf16ToFloat(v.bits));
  else if constexpr (std::is_same_v<From, F16>)
    return convert<float, To>(halfToFloat(v.bits));
  else if constexpr (std::is_same_v<To, Bf16>)
    return Bf16{floatToBf16(convert<From, float>(v))}; // integers round as PyTorch: via f32
  else if constexpr (std::is_same_v<To, F16>)
    return F16{floatToHalf(convert<From, float>(v))};
  else if constexpr (std::is_same_v<To, Bool>)
    return v != From(0);
  else if constexpr (std::is_same_v<From, Bool>)
    return static_cast<To>(v != 0);
  else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>)
    return truncateToInteger<To>(v); // toward zero; NaN and out of range: the minimum
  else
    return static_cast<To>(v);
}

template <typename From, typename To> KernelFn makeCast(int64_t n) {
  return flatUnary<From, To>(n, 1, [](const From *x, To *y, int64_t len) {
    for (int64_t i = 0; i < len; ++i)
      y[i] = convert<From, To>(x[i]);
  });
}

template <typename From> Status makeCastFrom(const KernelSignature &sig, DType to, int64_t n, KernelFn *fn) {
  switch (to) {
  case DType::F32: *fn = makeCast<From, float>(n); return {};
  case DType::BF16: *fn = makeCast<From, Bf16>(n); return {};
  case DType::F16: *fn = makeCast<From, F16>(n); return {};
  case DType::I64: *fn = makeCast<From, int64_t>(n); return {};
  case DType::I32: *fn = makeCast<From, int32_t>(n); return {};
  case DType::I1: *fn = makeCast<From, Bool>(n); return {};
  default: return noKernelFor(sig.kernel, to);
  }
}

/// Converts directly between every pair of f32, bf16, f16, i64, i32 and i1
/// (cast is the only CPU kernel that takes f16).
Status buildCast(const KernelSignature &sig, KernelFn *fn) {
  CLEAVE_RETURN_IF_ERROR(checkCast(
      sig, "cpu", {DType::F32, DType::BF16, DType::F16, DType::I64, DType::I32, DType::I1}));
  const TensorDesc &in = *sig.inputs[0];
  const TensorDesc &out = sig.outputs[0];
  const int64_t n = in.numel();
  if (in.dtype == out.dtype) {
    size_t bytes = in.bytes();
    *fn = [bytes](const KernelCall &call) -> Status {
      std::memcpy(call.outputs[0], call.inputs[0], bytes);
      return {};
    };
    return {};
  }
  switch (in.dtype) {
  case DType::F32: return makeCastFrom<float>(sig, out.dtype, n, fn);
  case DType::BF16: return makeCastFrom<Bf16>(sig, out.dtype, n, fn);
  case DType::F16: return makeCastFrom<F16>(sig, out.dtype, n, fn);
  case DType::I64: return makeCastFrom<int64_t>(sig, out.dtype, n, fn);
  case DType::I32: return makeCastFrom<int32_t>(sig, out.dtype, n, fn);
  case DType::I1: return makeCastFrom<Bool>(sig, out.dtype, n, fn);
  default: return noKernelFor(sig.kernel, in.dtype);
  }
}

//===----------------------------------------------------------------------===//
// tril / triu: byte copies of the kept part of each row, zeros elsewhere.
// They move bits only, so every dtype works (a zero is all-zero bits).
//===----------------------------------------------------------------------===//

template <bool Lower> Status buildTriangle(const KernelSignature &sig, KernelFn *fn) {
  TriangleParams tp;
  CLEAVE_RETURN_IF_ERROR(parseTriangle(sig, &tp));
  const TensorDesc &in = *sig.inputs[0];
  const int64_t rows = tp.rows, cols = tp.cols, diagonal = tp.diagonal;
  const int64_t totalRows = cols ? in.numel() / cols : 0;
  const size_t elem = dtypeBytes(in.dtype);
  *fn = [=](const KernelCall &call) -> Status {
    const char *x = static_cast<const char *>(call.inputs[0]);
    char *y = static_cast<char *>(call.outputs[0]);
    parallelRange(totalRows, cols, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        int64_t i = r % rows;
        // Kept columns [keepBegin, keepEnd).
        int64_t keepBegin, keepEnd;
        if (Lower) {
          keepBegin = 0;
          keepEnd = std::clamp<int64_t>(i + diagonal + 1, 0, cols);
        } else {
          keepBegin = std::clamp<int64_t>(i + diagonal, 0, cols);
          keepEnd = cols;
        }
        const char *src = x + r * cols * elem;
        char *dst = y + r * cols * elem;
        std::memset(dst, 0, keepBegin * elem);
        std::memcpy(dst + keepBegin * elem, src + keepBegin * elem, (keepEnd - keepBegin) * elem);
        std::memset(dst + keepEnd * elem, 0, (cols - keepEnd) * elem);
      }
    });
    return {};
  };
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
  table["maximum"] = buildArithmetic<MaxOp>;
  table["minimum"] = buildArithmetic<MinOp>;
  table["pow"] = buildPow;
  table["and"] = buildLogical<AndOp>;
  table["or"] = buildLogical<OrOp>;
  table["xor"] = buildLogical<XorOp>;
  table["shift_left"] = buildShift<ShiftLeftOp>;
  table["shift_right"] = buildShift<ShiftRightOp>;
  table["compare"] = buildCompare;
  table["where"] = buildWhere;
  table["cast"] = {buildCast, /*takesBf16=*/true};
  table["tril"] = {buildTriangle<true>, /*takesBf16=*/true};
  table["triu"] = {buildTriangle<false>, /*takesBf16=*/true};
}

} // namespace cleave::runtime::cpu
