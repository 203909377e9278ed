//===- Special.cu - Special-function kernels (lgamma, Bessel, zeta...) ----===//
//
// The CPU kernels' functions (runtime/cpu/Special.cpp), from the same code:
// runtime/SpecialMath.h, computed in double as on the CPU (f32 and bf16 are
// widened, then rounded once): in float, the cancellation near the zeros of
// the Bessel functions loses most of float's digits.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/SpecialMath.h"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

#include <string>

namespace cleave::runtime::cuda {
namespace {

namespace sf = ::cleave::runtime::special;

template <typename T, typename Fn>
__global__ void specialMapKernel(const T *__restrict__ x, T *__restrict__ y, int64_t n, Fn fn) {
  for (int64_t i = globalThread(); i < n; i += globalThreads())
    y[i] = store<T>(static_cast<float>(fn(static_cast<double>(load(x[i])))));
}

template <typename T, typename Fn>
__global__ void specialZipKernel(const T *__restrict__ a, const T *__restrict__ b,
                                 T *__restrict__ out, DeviceLayout layout, int64_t n, Fn fn) {
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    int64_t off[2];
    layoutOffsets<2>(layout, i, off);
    out[i] = store<T>(static_cast<float>(
        fn(static_cast<double>(load(a[off[0]])), static_cast<double>(load(b[off[1]])))));
  }
}

template <typename T, typename Fn>
KernelFn makeSpecialMap(const KernelSignature &sig, DeviceContext &ctx, int64_t n, Fn fn) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  return [c, name, n, fn](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    specialMapKernel<T><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<T *>(call.outputs[0]), n, fn);
    return launchStatus(name);
  };
}

template <typename Fn>
Status buildSpecialMap(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn, Fn f) {
  CLEAVE_RETURN_IF_ERROR(checkUnary(sig, "cuda", {DType::F32, DType::BF16}));
  const int64_t n = sig.inputs[0]->numel();
  if (sig.inputs[0]->dtype == DType::F32)
    *fn = makeSpecialMap<float>(sig, ctx, n, f);
  else
    *fn = makeSpecialMap<bf16>(sig, ctx, n, f);
  return {};
}

/// Same-typed elements, no float conversion (nextafter, gcd, lcm).
template <typename T, typename Fn>
__global__ void exactZipKernel(const T *__restrict__ a, const T *__restrict__ b,
                               T *__restrict__ out, DeviceLayout layout, int64_t n, Fn fn) {
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    int64_t off[2];
    layoutOffsets<2>(layout, i, off);
    out[i] = fn(a[off[0]], b[off[1]]);
  }
}

template <typename T, typename Fn>
KernelFn makeExactZip(const KernelSignature &sig, DeviceContext &ctx, const DeviceLayout &layout,
                      int64_t n, Fn fn) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  return [c, name, layout, n, fn](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    exactZipKernel<T><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<const T *>(call.inputs[1]),
        static_cast<T *>(call.outputs[0]), layout, n, fn);
    return launchStatus(name);
  };
}

struct NextafterFn {
  __device__ float operator()(float a, float b) const { return nextafterf(a, b); }
};
template <bool Lcm> struct GcdLcmFn {
  template <typename I> __device__ I operator()(I a, I b) const {
    return Lcm ? sf::lcm(a, b) : sf::gcd(a, b);
  }
};

Status buildNextafter(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  BroadcastLayout host;
  CLEAVE_RETURN_IF_ERROR(parseBinary(sig, "cuda", {DType::F32}, std::nullopt, &host));
  DeviceLayout layout;
  CLEAVE_RETURN_IF_ERROR(toDevice(sig, host, &layout));
  *fn = makeExactZip<float>(sig, ctx, layout, sig.outputs[0].numel(), NextafterFn{});
  return {};
}

template <bool Lcm>
Status buildGcdLcm(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  BroadcastLayout host;
  CLEAVE_RETURN_IF_ERROR(parseBinary(sig, "cuda", {DType::I64, DType::I32}, std::nullopt, &host));
  DeviceLayout layout;
  CLEAVE_RETURN_IF_ERROR(toDevice(sig, host, &layout));
  const int64_t n = sig.outputs[0].numel();
  if (sig.inputs[0]->dtype == DType::I64)
    *fn = makeExactZip<int64_t>(sig, ctx, layout, n, GcdLcmFn<Lcm>{});
  else
    *fn = makeExactZip<int32_t>(sig, ctx, layout, n, GcdLcmFn<Lcm>{});
  return {};
}

__global__ void frexpKernel(const float *__restrict__ x, float *__restrict__ m,
                            int32_t *__restrict__ e, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    int exponent = 0;
    m[i] = frexpf(x[i], &exponent);
    e[i] = isfinite(x[i]) ? exponent : 0;
  }
}

Status buildFrexp(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &in = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, "input", in, {DType::F32}));
  if (sig.outputs[0].shape != in.shape || sig.outputs[0].dtype != DType::F32 ||
      sig.outputs[1].shape != in.shape || sig.outputs[1].dtype != DType::I32)
    return CLEAVE_ERROR(sig.kernel, ": expected outputs ", describe(in.shape, DType::F32), " and ",
                        describe(in.shape, DType::I32));
  const int64_t n = in.numel();
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  *fn = [c, name, n](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    frexpKernel<<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        static_cast<const float *>(call.inputs[0]), static_cast<float *>(call.outputs[0]),
        static_cast<int32_t *>(call.outputs[1]), n);
    return launchStatus(name);
  };
  return {};
}

template <typename T, typename Fn>
KernelFn makeSpecialZip(const KernelSignature &sig, DeviceContext &ctx, const DeviceLayout &layout,
                        int64_t n, Fn fn) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  return [c, name, layout, n, fn](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    specialZipKernel<T><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<const T *>(call.inputs[1]),
        static_cast<T *>(call.outputs[0]), layout, n, fn);
    return launchStatus(name);
  };
}

template <typename Fn>
Status buildSpecialZip(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn, Fn f) {
  BroadcastLayout host;
  CLEAVE_RETURN_IF_ERROR(parseBinary(sig, "cuda", {DType::F32, DType::BF16}, std::nullopt, &host));
  DeviceLayout layout;
  CLEAVE_RETURN_IF_ERROR(toDevice(sig, host, &layout));
  const int64_t n = sig.outputs[0].numel();
  if (sig.inputs[0]->dtype == DType::F32)
    *fn = makeSpecialZip<float>(sig, ctx, layout, n, f);
  else
    *fn = makeSpecialZip<bf16>(sig, ctx, layout, n, f);
  return {};
}

#define CLEAVE_UNARY(name, expr)                                                              \
  struct name##Fn {                                                                           \
    __device__ double operator()(double x) const { return expr; }                             \
  };
CLEAVE_SPECIAL_UNARY_FUNCTIONS(CLEAVE_UNARY)
#undef CLEAVE_UNARY
#define CLEAVE_BINARY(name, expr)                                                             \
  struct name##Fn {                                                                           \
    __device__ double operator()(double x, double y) const { return expr; }                   \
  };
CLEAVE_SPECIAL_BINARY_FUNCTIONS(CLEAVE_BINARY)
#undef CLEAVE_BINARY

struct PolygammaFn {
  int64_t order;
  __device__ double operator()(double x) const { return sf::polygamma(order, x); }
};
struct PolynomialFn {
  sf::Polynomial which;
  __device__ double operator()(double x, double n) const { return sf::polynomial(which, x, n); }
};

Status buildPolygamma(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  int64_t order = 0;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("n", &order)));
  if (order < 0)
    return CLEAVE_ERROR(sig.kernel, ": order n must be non-negative, got ", order);
  return buildSpecialMap(sig, ctx, fn, PolygammaFn{order});
}

Status buildPolynomial(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  std::string family;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getString("family", &family)));
  sf::Polynomial which;
  if (!sf::parsePolynomial(family.c_str(), &which))
    return CLEAVE_ERROR(sig.kernel, ": unknown polynomial family '", family, "'");
  return buildSpecialZip(sig, ctx, fn, PolynomialFn{which});
}

} // namespace

void registerSpecialKernels(KernelTable &table) {
#define CLEAVE_UNARY(name, expr)                                                              \
  table[#name] = [](const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {           \
    return buildSpecialMap(sig, ctx, fn, name##Fn{});                                         \
  };
  CLEAVE_SPECIAL_UNARY_FUNCTIONS(CLEAVE_UNARY)
#undef CLEAVE_UNARY
#define CLEAVE_BINARY(name, expr)                                                             \
  table[#name] = [](const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {           \
    return buildSpecialZip(sig, ctx, fn, name##Fn{});                                         \
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

} // namespace cleave::runtime::cuda
