//===- Special.cpp - Special-function kernels (lgamma, Bessel, zeta...) ---===//
//
// f32 tensors, each element computed in double by runtime/SpecialMath.h (the
// same code as the CUDA kernels, which compute in float) and rounded once.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/SpecialMath.h"
#include "runtime/cpu/Common.h"
#include "runtime/cpu/Registry.h"

#include <array>
#include <cmath>

namespace cleave::runtime::cpu {
namespace {

namespace sf = ::cleave::runtime::special;

/// Elements per thread chunk are costly: a series of tens of terms each.
constexpr int64_t kSpecialCost = 64;

template <typename Fn> KernelFn mapFloat(int64_t n, Fn fn) {
  return [n, fn](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    float *y = static_cast<float *>(call.outputs[0]);
    parallelRange(n, kSpecialCost, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        y[i] = static_cast<float>(fn(static_cast<double>(x[i])));
    });
    return {};
  };
}

template <typename Fn> Status buildMap(const KernelSignature &sig, KernelFn *fn, Fn f) {
  CLEAVE_RETURN_IF_ERROR(checkUnary(sig, "cpu", {DType::F32}));
  *fn = mapFloat(sig.inputs[0]->numel(), f);
  return {};
}

/// out = fn(a, b) over the broadcast, elements of T (fn takes and returns
/// its own types: double for the float functions).
template <typename T, typename Fn> KernelFn zip(const BroadcastLayout &layout, Fn fn) {
  return [layout, fn](const KernelCall &call) -> Status {
    const T *a = static_cast<const T *>(call.inputs[0]);
    const T *b = static_cast<const T *>(call.inputs[1]);
    T *out = static_cast<T *>(call.outputs[0]);
    const int64_t sa = layout.innerStride(0), sb = layout.innerStride(1);
    forEachSpan(layout, [&](const std::array<int64_t, kMaxOperands> &off, int64_t pos,
                            int64_t len) {
      const T *pa = a + off[0], *pb = b + off[1];
      for (int64_t i = 0; i < len; ++i)
        out[pos + i] = static_cast<T>(fn(pa[i * sa], pb[i * sb]));
    });
    return {};
  };
}
template <typename Fn> KernelFn zipFloat(const BroadcastLayout &layout, Fn fn) {
  return zip<float>(layout, [fn](float a, float b) {
    return fn(static_cast<double>(a), static_cast<double>(b));
  });
}

template <typename Fn> Status buildZip(const KernelSignature &sig, KernelFn *fn, Fn f) {
  BroadcastLayout layout;
  CLEAVE_RETURN_IF_ERROR(parseBinary(sig, "cpu", {DType::F32}, std::nullopt, &layout));
  *fn = zipFloat(layout, f);
  return {};
}

Status buildPolygamma(const KernelSignature &sig, KernelFn *fn) {
  int64_t order = 0;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("n", &order)));
  if (order < 0)
    return CLEAVE_ERROR(sig.kernel, ": order n must be non-negative, got ", order);
  return buildMap(sig, fn, [order](double x) { return sf::polygamma(order, x); });
}

Status buildPolynomial(const KernelSignature &sig, KernelFn *fn) {
  std::string family;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getString("family", &family)));
  sf::Polynomial which;
  if (!sf::parsePolynomial(family.c_str(), &which))
    return CLEAVE_ERROR(sig.kernel, ": unknown polynomial family '", family, "'");
  return buildZip(sig, fn, [which](double x, double n) { return sf::polynomial(which, x, n); });
}

/// nextafter steps in the operands' own precision: f32, not double.
Status buildNextafter(const KernelSignature &sig, KernelFn *fn) {
  BroadcastLayout layout;
  CLEAVE_RETURN_IF_ERROR(parseBinary(sig, "cpu", {DType::F32}, std::nullopt, &layout));
  *fn = zip<float>(layout, [](float a, float b) { return std::nextafter(a, b); });
  return {};
}

template <bool Lcm> Status buildGcdLcm(const KernelSignature &sig, KernelFn *fn) {
  BroadcastLayout layout;
  CLEAVE_RETURN_IF_ERROR(parseBinary(sig, "cpu", {DType::I64, DType::I32}, std::nullopt, &layout));
  if (sig.inputs[0]->dtype == DType::I64)
    *fn = zip<int64_t>(layout, [](int64_t a, int64_t b) { return Lcm ? sf::lcm(a, b) : sf::gcd(a, b); });
  else
    *fn = zip<int32_t>(layout, [](int32_t a, int32_t b) { return Lcm ? sf::lcm(a, b) : sf::gcd(a, b); });
  return {};
}

/// frexp: f32 -> (f32 mantissa, i32 exponent) of the input's shape.
Status buildFrexp(const KernelSignature &sig, KernelFn *fn) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &in = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, "cpu", "input", in, {DType::F32}));
  if (sig.outputs[0].shape != in.shape || sig.outputs[0].dtype != DType::F32 ||
      sig.outputs[1].shape != in.shape || sig.outputs[1].dtype != DType::I32)
    return CLEAVE_ERROR(sig.kernel, ": expected outputs ", describe(in.shape, DType::F32), " and ",
                        describe(in.shape, DType::I32));
  const int64_t n = in.numel();
  *fn = [n](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    float *m = static_cast<float *>(call.outputs[0]);
    int32_t *e = static_cast<int32_t *>(call.outputs[1]);
    parallelRange(n, 4, [&](int64_t b, int64_t end) {
      for (int64_t i = b; i < end; ++i) {
        int exponent = 0;
        m[i] = std::frexp(x[i], &exponent);
        e[i] = std::isfinite(x[i]) ? exponent : 0;
      }
    });
    return {};
  };
  return {};
}

} // namespace

void registerSpecialKernels(KernelTable &table) {
#define CLEAVE_UNARY(name, expr)                                                              \
  table[#name] = +[](const KernelSignature &sig, KernelFn *fn) {                             \
    return buildMap(sig, fn, [](double x) { return expr; });                                  \
  };
  CLEAVE_SPECIAL_UNARY_FUNCTIONS(CLEAVE_UNARY)
#undef CLEAVE_UNARY
#define CLEAVE_BINARY(name, expr)                                                             \
  table[#name] = +[](const KernelSignature &sig, KernelFn *fn) {                             \
    return buildZip(sig, fn, [](double x, double y) { return expr; });                        \
  };
  CLEAVE_SPECIAL_BINARY_FUNCTIONS(CLEAVE_BINARY)
#undef CLEAVE_BINARY
  table["polygamma"] = buildPolygamma;
  table["orthogonal_polynomial"] = buildPolynomial;
  table["nextafter"] = buildNextafter;
  table["frexp"] = buildFrexp;
  table["gcd"] = buildGcdLcm<false>;
  table["lcm"] = buildGcdLcm<true>;
}

} // namespace cleave::runtime::cpu
