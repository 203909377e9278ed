//===- CpuKernelsTest.cpp - Kernel conformance suite over backends --------===//
//
// Every kernel of the cleave dialect is run against a naive reference
// written here (double accumulation, plain loops), and every builder is fed
// malformed instructions whose errors must name the problem. The suite is
// parameterized over backends: a new backend is one more entry in
// makeBackend() and INSTANTIATE_TEST_SUITE_P; a backend that cannot start
// (no device) skips.
//
//===----------------------------------------------------------------------===//

#include "runtime/BFloat16.h"
#include "runtime/Backend.h"
#include "runtime/DeviceBackends.h"
#include "runtime/Philox.h"
#include "runtime/cpu/ConvScratch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <set>

using namespace cleave::runtime;

namespace {

/// The backend named `name`, or null with the reason it cannot start here
/// (no GPU, no driver, a build without CUDA).
std::unique_ptr<Backend> makeBackend(const std::string &name, std::string *why) {
  BackendChoice choice;
  Status status = parseBackendChoice(name, &choice);
  std::unique_ptr<Backend> backend;
  if (status.ok())
    status = createBackend(choice, /*localRank=*/0, /*localRanks=*/1, BackendOptions(), &backend);
  if (!status.ok()) {
    *why = status.message();
    return nullptr;
  }
  return backend;
}

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

//===----------------------------------------------------------------------===//
// Host tensors and references helpers.
//===----------------------------------------------------------------------===//

struct HostTensor {
  TensorDesc desc;
  std::vector<unsigned char> bytes;

  HostTensor() = default;
  HostTensor(DType dtype, Shape shape) : desc{dtype, std::move(shape)}, bytes(desc.bytes()) {}

  template <typename T> T *as() { return reinterpret_cast<T *>(bytes.data()); }
  template <typename T> const T *as() const { return reinterpret_cast<const T *>(bytes.data()); }
  int64_t numel() const { return desc.numel(); }

  /// Element i as a double, whatever the dtype.
  double at(int64_t i) const {
    switch (desc.dtype) {
    case DType::F32: return as<float>()[i];
    case DType::BF16: return bf16ToFloat(as<uint16_t>()[i]);
    case DType::I64: return static_cast<double>(as<int64_t>()[i]);
    case DType::I32: return as<int32_t>()[i];
    case DType::I1: return as<uint8_t>()[i];
    default: return bytes[i];
    }
  }
  std::vector<double> values() const {
    std::vector<double> v(numel());
    for (int64_t i = 0; i < numel(); ++i)
      v[i] = at(i);
    return v;
  }
};

/// A tensor of `dtype` holding `values` (converted; i1 stores v != 0).
HostTensor make(DType dtype, Shape shape, const std::vector<double> &values) {
  HostTensor t(dtype, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  for (int64_t i = 0; i < t.numel() && i < static_cast<int64_t>(values.size()); ++i) {
    switch (dtype) {
    case DType::F32: t.as<float>()[i] = static_cast<float>(values[i]); break;
    case DType::BF16: t.as<uint16_t>()[i] = floatToBf16(static_cast<float>(values[i])); break;
    case DType::I64: t.as<int64_t>()[i] = static_cast<int64_t>(values[i]); break;
    case DType::I32: t.as<int32_t>()[i] = static_cast<int32_t>(values[i]); break;
    case DType::I1: t.as<uint8_t>()[i] = values[i] != 0; break;
    default: t.bytes[i] = static_cast<unsigned char>(values[i]); break;
    }
  }
  return t;
}

Shape broadcastShape(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// Flat offset in `in` of the element that broadcasts to output element
/// `flat` of shape `out`.
int64_t broadcastOffset(const Shape &out, const Shape &in, int64_t flat) {
  int64_t off = 0, stride = 1;
  int64_t k = static_cast<int64_t>(in.size()) - 1;
  for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d, --k) {
    int64_t idx = flat % out[d];
    flat /= out[d];
    if (k >= 0) {
      if (in[k] != 1)
        off += idx * stride;
      stride *= in[k];
    }
  }
  return off;
}

std::vector<int64_t> unravel(int64_t flat, const Shape &shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t> &idx, const Shape &shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + idx[d];
  return flat;
}

using Ints = std::vector<int64_t>;

Attributes attrs(std::initializer_list<std::pair<const char *, AttrValue>> values) {
  Attributes a;
  for (const auto &[name, value] : values)
    a.set(name, value);
  return a;
}
AttrValue I(int64_t v) { return v; }
AttrValue F(double v) { return v; }
AttrValue S(const char *v) { return std::string(v); }
AttrValue L(Ints v) { return v; }
AttrValue B(bool v) { return v; }

TensorDesc D(DType dtype, Shape shape) { return {dtype, std::move(shape)}; }
const DType f32 = DType::F32, i64 = DType::I64, i32 = DType::I32, i1 = DType::I1,
            bf16 = DType::BF16, f16 = DType::F16;

KernelSignature sig(const std::string &kernel, std::vector<std::optional<TensorDesc>> inputs,
                    TensorDesc output, Attributes a = {}, size_t scratch = 0) {
  KernelSignature s;
  s.kernel = kernel;
  s.inputs = std::move(inputs);
  s.outputs = {std::move(output)};
  s.attrs = std::move(a);
  s.scratchBytes = scratch;
  return s;
}

#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    ::cleave::runtime::Status s_ = (expr);                                     \
    ASSERT_TRUE(s_.ok()) << s_.message() << " (" << s_.origin() << ")";        \
  } while (0)

/// Compares element by element; NaN matches NaN, infinities match exactly.
void expectClose(const HostTensor &got, const std::vector<double> &want, double atol = 1e-5,
                 double rtol = 1e-5, const std::string &what = "") {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  int reported = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.at(i), w = want[i];
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else
      ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok && reported++ < 5)
      ADD_FAILURE() << what << " element " << i << " of " << describe(got.desc.shape, got.desc.dtype)
                    << ": got " << g << ", want " << w;
  }
}

void expectEqual(const HostTensor &got, const std::vector<double> &want, const std::string &what = "") {
  expectClose(got, want, 0, 0, what);
}

//===----------------------------------------------------------------------===//
// The fixture: runs kernels through the Backend interface only.
//===----------------------------------------------------------------------===//

class KernelTest : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    std::string why;
    backend = makeBackend(GetParam(), &why);
    if (!backend)
      GTEST_SKIP() << "backend '" << GetParam() << "' cannot start here: " << why;
  }

  HostTensor random(Shape shape, double lo = -2, double hi = 2) {
    HostTensor t(f32, std::move(shape));
    std::uniform_real_distribution<float> dist(static_cast<float>(lo), static_cast<float>(hi));
    for (int64_t i = 0; i < t.numel(); ++i)
      t.as<float>()[i] = dist(rng);
    return t;
  }

  HostTensor randomInts(DType dtype, Shape shape, int64_t lo, int64_t hi) {
    std::uniform_int_distribution<int64_t> dist(lo, hi);
    std::vector<double> v(numElements(shape));
    for (double &x : v)
      x = static_cast<double>(dist(rng));
    return make(dtype, std::move(shape), v);
  }

  HostTensor randomBools(Shape shape) { return randomInts(i1, std::move(shape), 0, 1); }

  Status prepare(const KernelSignature &s, KernelFn *fn) { return backend->prepareKernel(s, fn); }

  /// Prepares and runs `s` on device copies of `inputs` (nullptr for an
  /// absent optional input); the output starts as garbage.
  Status run(const KernelSignature &s, const std::vector<const HostTensor *> &inputs,
             HostTensor *out, int calls = 1) {
    std::vector<HostTensor> outs;
    CLEAVE_RETURN_IF_ERROR(runAll(s, inputs, &outs, calls));
    *out = std::move(outs[0]);
    return {};
  }

  /// The same for every output of `s` (an index reduction has two);
  /// `calls` > 1 calls the kernel again on the same buffers, the scratch
  /// refilled with junk each time, and returns the last call's outputs.
  Status runAll(const KernelSignature &s, const std::vector<const HostTensor *> &inputs,
                std::vector<HostTensor> *outs, int calls = 1) {
    KernelFn fn;
    CLEAVE_RETURN_IF_ERROR(prepare(s, &fn));
    KernelCall call;
    std::vector<void *> owned;
    auto alloc = [&](size_t bytes, void **p) -> Status {
      CLEAVE_RETURN_IF_ERROR(backend->allocate(bytes, p));
      owned.push_back(*p);
      return {};
    };
    Status status;
    auto body = [&]() -> Status {
      for (const HostTensor *in : inputs) {
        if (!in) {
          call.inputs.push_back(nullptr);
          continue;
        }
        void *p = nullptr;
        CLEAVE_RETURN_IF_ERROR(alloc(in->bytes.size(), &p));
        CLEAVE_RETURN_IF_ERROR(backend->copyToDevice(p, in->bytes.data(), in->bytes.size()));
        call.inputs.push_back(p);
      }
      outs->clear();
      for (const TensorDesc &desc : s.outputs) {
        outs->emplace_back(desc.dtype, desc.shape);
        std::vector<unsigned char> garbage(outs->back().bytes.size(), 0xA5);
        void *p = nullptr;
        CLEAVE_RETURN_IF_ERROR(alloc(garbage.size(), &p));
        CLEAVE_RETURN_IF_ERROR(backend->copyToDevice(p, garbage.data(), garbage.size()));
        call.outputs.push_back(p);
      }
      if (s.scratchBytes)
        CLEAVE_RETURN_IF_ERROR(alloc(s.scratchBytes, &call.scratch));
      for (int i = 0; i < calls; ++i) {
        if (s.scratchBytes) {
          std::vector<unsigned char> junk(s.scratchBytes, static_cast<unsigned char>(0x5A + i));
          CLEAVE_RETURN_IF_ERROR(backend->copyToDevice(call.scratch, junk.data(), junk.size()));
        }
        CLEAVE_RETURN_IF_ERROR(fn(call));
      }
      CLEAVE_RETURN_IF_ERROR(backend->synchronize());
      for (size_t i = 0; i < outs->size(); ++i)
        CLEAVE_RETURN_IF_ERROR(backend->copyToHost((*outs)[i].bytes.data(), call.outputs[i],
                                                   (*outs)[i].bytes.size()));
      return Status();
    };
    status = body();
    for (void *p : owned)
      backend->deallocate(p);
    return status;
  }

  /// Runs `kernel` on `inputs` with output desc `out`.
  Status run(const std::string &kernel, const std::vector<const HostTensor *> &inputs,
             TensorDesc outDesc, HostTensor *out, Attributes a = {}, size_t scratch = 0) {
    std::vector<std::optional<TensorDesc>> descs;
    for (const HostTensor *in : inputs)
      descs.push_back(in ? std::optional<TensorDesc>(in->desc) : std::nullopt);
    return run(sig(kernel, descs, std::move(outDesc), std::move(a), scratch), inputs, out);
  }

  /// prepareKernel must fail with a message containing every part.
  void expectError(const KernelSignature &s, std::initializer_list<std::string> parts) {
    KernelFn fn;
    Status status = prepare(s, &fn);
    ASSERT_FALSE(status.ok()) << s.kernel << ": expected an error mentioning '" << *parts.begin()
                              << "'";
    for (const std::string &part : parts)
      EXPECT_NE(status.message().find(part), std::string::npos)
          << "error '" << status.message() << "' does not mention '" << part << "'";
  }

  std::unique_ptr<Backend> backend;
  std::mt19937 rng{1234};
};

//===----------------------------------------------------------------------===//
// Backend basics.
//===----------------------------------------------------------------------===//

const std::vector<std::string> kAllKernels = {
    "neg", "abs", "relu", "silu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt",
    "sin", "cos", "erf", "not", "gelu", "floor", "ceil", "round", "trunc", "sign",
    "log1p", "expm1", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
    "atanh", "reciprocal", "add", "sub", "mul", "div", "pow",
    "maximum", "minimum", "and", "or", "xor", "shift_left", "shift_right", "compare", "where", "cast", "tril", "triu",
    "matmul", "linear", "embedding", "layer_norm", "batch_norm", "softmax",
    "log_softmax", "reduce_sum", "reduce_mean", "reduce_max", "reduce_prod",
    "reduce_max_index", "reduce_min_index", "cumsum", "cumprod", "cummax", "cummin",
    "logcumsumexp", "sort", "conv2d", "fused_conv2d", "max_pool2d",
    "avg_pool2d", "adaptive_avg_pool2d", "reshape", "permute", "broadcast_to", "slice",
    "concat", "gather", "scatter", "attention",
    // runtime/SpecialMath.h
    "lgamma", "polygamma", "erfinv", "i0", "i0e", "i1", "i1e", "ndtri", "erfcx", "bessel_j0",
    "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
    "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "airy_ai", "zeta", "igamma",
    "igammac", "orthogonal_polynomial", "nextafter", "gcd", "lcm", "frexp",
    "lu_factor", "lu_pivots_to_permutation", "cholesky", "triangular_solve",
};

/// The training kernels (runtime/cpu/Training.cpp and
/// TrainingContractions.cpp, and their CUDA twins).
const std::vector<std::string> kTrainingContractionKernels = {
    "assign", "dropout_train", "batch_norm_train", "update_running_stats",
    "batch_norm_backward", "nll_loss", "nll_loss_backward", "softmax_backward",
    "log_softmax_backward", "layer_norm_backward", "gelu_backward", "silu_backward",
    "relu_backward", "adamw", "sgd", "linear_backward_weight", "conv2d_backward_input", "conv2d_backward_weight",
    "max_pool2d_backward", "avg_pool2d_backward", "adaptive_avg_pool2d_backward",
    "attention_backward", "embedding_backward", "slice_backward"};

TEST_P(KernelTest, HasEveryKernelOfTheDialect) {
  std::set<std::string> names;
  for (const std::string &n : backend->kernelNames())
    names.insert(n);
  // Both backends run every kernel a plan can name, training ones included.
  std::set<std::string> expected(kAllKernels.begin(), kAllKernels.end());
  expected.insert(kTrainingContractionKernels.begin(), kTrainingContractionKernels.end());
  EXPECT_EQ(names, expected);
  for (const std::string &n : kAllKernels)
    EXPECT_TRUE(backend->hasKernel(n)) << n;
  EXPECT_FALSE(backend->hasKernel("param"));
  EXPECT_FALSE(backend->hasKernel("constant"));
}

TEST_P(KernelTest, UnknownKernelIsNamed) {
  expectError(sig("frobnicate", {D(f32, {2})}, D(f32, {2})), {"frobnicate"});
}

TEST_P(KernelTest, AllocatesAlignedMemoryAndCopies) {
  for (size_t bytes : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(1000)}) {
    void *p = nullptr;
    ASSERT_OK(backend->allocate(bytes, &p));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::vector<unsigned char> src(bytes), dst(bytes);
    for (size_t i = 0; i < bytes; ++i)
      src[i] = static_cast<unsigned char>(i * 7);
    ASSERT_OK(backend->copyToDevice(p, src.data(), bytes));
    ASSERT_OK(backend->copyToHost(dst.data(), p, bytes));
    EXPECT_EQ(src, dst);
    backend->deallocate(p);
  }
  ASSERT_OK(backend->synchronize());
}

TEST_P(KernelTest, EveryBuilderRejectsMalformedSignatures) {
  for (const std::string &kernel : kAllKernels) {
    // No inputs at all.
    expectError(sig(kernel, {}, D(f32, {2})), {kernel + ":"});
    // Inputs but no output.
    KernelSignature noOutput = sig(kernel, {D(f32, {2, 2})}, D(f32, {2, 2}));
    noOutput.outputs.clear();
    expectError(noOutput, {kernel + ":"});
    // Five absent inputs.
    expectError(sig(kernel, std::vector<std::optional<TensorDesc>>(5), D(f32, {2})), {kernel + ":"});
  }
}

TEST_P(KernelTest, RejectsNegativeDims) {
  expectError(sig("relu", {D(f32, {2, -1})}, D(f32, {2, -1})), {"relu", "negative"});
}

//===----------------------------------------------------------------------===//
// Unary elementwise.
//===----------------------------------------------------------------------===//

double refGeluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double refGeluTanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  const char *kernel;
  std::function<double(double)> ref;
  double lo, hi;
  Attributes attrs;
};

TEST_P(KernelTest, FloatUnaryOpsMatchReference) {
  std::vector<UnaryCase> cases = {
      {"neg", [](double x) { return -x; }, -3, 3, {}},
      {"abs", [](double x) { return std::fabs(x); }, -3, 3, {}},
      {"relu", [](double x) { return x < 0 ? 0 : x; }, -3, 3, {}},
      {"silu", [](double x) { return x / (1 + std::exp(-x)); }, -12, 12, {}},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -20, 20, {}},
      {"tanh", [](double x) { return std::tanh(x); }, -6, 6, {}},
      {"exp", [](double x) { return std::exp(x); }, -30, 30, {}},
      {"log", [](double x) { return std::log(x); }, 1e-3, 50, {}},
      {"sqrt", [](double x) { return std::sqrt(x); }, 0, 50, {}},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, 1e-2, 50, {}},
      {"sin", [](double x) { return std::sin(x); }, -7, 7, {}},
      {"cos", [](double x) { return std::cos(x); }, -7, 7, {}},
      {"erf", [](double x) { return std::erf(x); }, -5, 5, {}},
      {"floor", [](double x) { return std::floor(x); }, -10, 10, {}},
      {"ceil", [](double x) { return std::ceil(x); }, -10, 10, {}},
      {"round", [](double x) { return std::nearbyint(x); }, -10, 10, {}},
      {"trunc", [](double x) { return std::trunc(x); }, -10, 10, {}},
      {"sign", [](double x) { return double((x > 0) - (x < 0)); }, -3, 3, {}},
      {"log1p", [](double x) { return std::log1p(x); }, -0.99, 50, {}},
      {"expm1", [](double x) { return std::expm1(x); }, -20, 20, {}},
      {"tan", [](double x) { return std::tan(x); }, -1.5, 1.5, {}},
      {"asin", [](double x) { return std::asin(x); }, -1, 1, {}},
      {"acos", [](double x) { return std::acos(x); }, -1, 1, {}},
      {"atan", [](double x) { return std::atan(x); }, -20, 20, {}},
      {"sinh", [](double x) { return std::sinh(x); }, -10, 10, {}},
      {"cosh", [](double x) { return std::cosh(x); }, -10, 10, {}},
      {"asinh", [](double x) { return std::asinh(x); }, -50, 50, {}},
      {"acosh", [](double x) { return std::acosh(x); }, 1, 50, {}},
      {"atanh", [](double x) { return std::atanh(x); }, -0.999, 0.999, {}},
      {"reciprocal", [](double x) { return 1 / x; }, -10, 10, {}},
      {"gelu", refGeluErf, -6, 6, {}},
      {"gelu", refGeluErf, -6, 6, attrs({{"approximation", S("none")}})},
      {"gelu", refGeluTanh, -6, 6, attrs({{"approximation", S("tanh")}})},
  };
  // An odd small shape and one large enough for the threaded path.
  for (const Shape &shape : {Shape{3, 7, 5}, Shape{}, Shape{257, 131}}) {
    for (const UnaryCase &c : cases) {
      HostTensor x = random(shape, c.lo, c.hi);
      HostTensor y;
      ASSERT_OK(run(c.kernel, {&x}, x.desc, &y, c.attrs));
      std::vector<double> want;
      for (double v : x.values())
        want.push_back(c.ref(static_cast<float>(v)));
      expectClose(y, want, 2e-6, 4e-6, c.kernel);
    }
  }
}

TEST_P(KernelTest, FloatUnarySpecialValues) {
  // Repeated so that both the vectorized loop and its scalar tail see them.
  const std::vector<double> values = {kInf, -kInf, kNaN, 0.0, 100.0, -100.0, 1e-6};
  const int kRepeats = 9;
  std::vector<double> repeated;
  for (int r = 0; r < kRepeats; ++r)
    repeated.insert(repeated.end(), values.begin(), values.end());
  HostTensor x = make(f32, {kRepeats * 7}, repeated);
  auto check = [&](const char *kernel, std::vector<double> want) {
    HostTensor y;
    ASSERT_OK(run(kernel, {&x}, x.desc, &y));
    std::vector<double> wantAll;
    for (int r = 0; r < kRepeats; ++r)
      wantAll.insert(wantAll.end(), want.begin(), want.end());
    expectClose(y, wantAll, 1e-12, 1e-6, kernel);
  };
  check("exp", {kInf, 0, kNaN, 1, kInf, 0, 1.000001});
  check("tanh", {1, -1, kNaN, 0, 1, -1, 1e-6});
  check("erf", {1, -1, kNaN, 0, 1, -1, std::erf(1e-6)});
  check("sigmoid", {1, 0, kNaN, 0.5, 1, 0, 0.50000025});
  check("relu", {kInf, 0, kNaN, 0, 100, 0, 1e-6});
  check("gelu", {kInf, kNaN, kNaN, 0, 100, 0, refGeluErf(1e-6)});
  check("floor", {kInf, -kInf, kNaN, 0, 100, -100, 0});
  check("ceil", {kInf, -kInf, kNaN, 0, 100, -100, 1});
  check("round", {kInf, -kInf, kNaN, 0, 100, -100, 0});
  check("trunc", {kInf, -kInf, kNaN, 0, 100, -100, 0});
  // NaN gives 0, as torch.sign (not NaN as numpy.sign).
  check("sign", {1, -1, 0, 0, 1, -1, 1});
  check("log1p", {kInf, kNaN, kNaN, 0, std::log1p(100.0), kNaN, std::log1p(1e-6)});
  check("expm1", {kInf, -1, kNaN, 0, kInf, -1, std::expm1(1e-6)});
  check("tan", {kNaN, kNaN, kNaN, 0, std::tan(100.0), std::tan(-100.0), 1e-6});
  check("asin", {kNaN, kNaN, kNaN, 0, kNaN, kNaN, 1e-6});
  check("acos", {kNaN, kNaN, kNaN, M_PI / 2, kNaN, kNaN, std::acos(1e-6)});
  check("atan", {M_PI / 2, -M_PI / 2, kNaN, 0, std::atan(100.0), std::atan(-100.0), 1e-6});
  check("sinh", {kInf, -kInf, kNaN, 0, kInf, -kInf, 1e-6});
  check("cosh", {kInf, kInf, kNaN, 1, kInf, kInf, 1});
  check("asinh", {kInf, -kInf, kNaN, 0, std::asinh(100.0), std::asinh(-100.0), 1e-6});
  check("acosh", {kInf, kNaN, kNaN, kNaN, std::acosh(100.0), kNaN, kNaN});
  check("atanh", {kNaN, kNaN, kNaN, 0, kNaN, kNaN, 1e-6});
  check("reciprocal", {0, 0, kNaN, kInf, 0.01, -0.01, 1e6});
}

TEST_P(KernelTest, FloatRoundingTiesAndSignedZeros) {
  // Halfway cases go to even (torch.round), not away from zero (std::round).
  const double huge = static_cast<float>(1e20); // already an integer
  HostTensor x = make(f32, {10}, {0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -2.7, 2.7, -0.2, huge});
  HostTensor y;
  ASSERT_OK(run("round", {&x}, x.desc, &y));
  expectEqual(y, {0, 2, 2, 0, -2, 4, -3, 3, 0, huge}, "round");
  EXPECT_TRUE(std::signbit(y.at(3))) << "round(-0.5) is -0";
  ASSERT_OK(run("floor", {&x}, x.desc, &y));
  expectEqual(y, {0, 1, 2, -1, -3, 3, -3, 2, -1, huge}, "floor");
  ASSERT_OK(run("ceil", {&x}, x.desc, &y));
  expectEqual(y, {1, 2, 3, 0, -2, 4, -2, 3, 0, huge}, "ceil");
  ASSERT_OK(run("trunc", {&x}, x.desc, &y));
  expectEqual(y, {0, 1, 2, 0, -2, 3, -2, 2, 0, huge}, "trunc");
  // sign(-0) is +0, as torch.sign; reciprocal keeps the zero's sign.
  HostTensor zeros = make(f32, {2}, {-0.0, 0.0});
  ASSERT_OK(run("sign", {&zeros}, zeros.desc, &y));
  EXPECT_FALSE(std::signbit(y.at(0)));
  ASSERT_OK(run("reciprocal", {&zeros}, zeros.desc, &y));
  expectEqual(y, {-kInf, kInf}, "reciprocal");
}

TEST_P(KernelTest, IntegerUnaryOps) {
  for (DType dt : {i64, i32}) {
    HostTensor x = make(dt, {2, 3}, {-5, 0, 7, -1, 2147483647, -2147483647});
    HostTensor y;
    ASSERT_OK(run("neg", {&x}, x.desc, &y));
    expectEqual(y, {5, 0, -7, 1, -2147483647, 2147483647}, "neg");
    ASSERT_OK(run("abs", {&x}, x.desc, &y));
    expectEqual(y, {5, 0, 7, 1, 2147483647, 2147483647}, "abs");
    ASSERT_OK(run("relu", {&x}, x.desc, &y));
    expectEqual(y, {0, 0, 7, 0, 2147483647, 0}, "relu");
    ASSERT_OK(run("sign", {&x}, x.desc, &y));
    expectEqual(y, {-1, 0, 1, -1, 1, -1}, "sign");
    // An integer rounds to itself, in its own dtype (as torch.floor etc.).
    for (const char *kernel : {"floor", "ceil", "round", "trunc"}) {
      ASSERT_OK(run(kernel, {&x}, x.desc, &y));
      expectEqual(y, {-5, 0, 7, -1, 2147483647, -2147483647}, kernel);
    }
  }
  // Beyond float's 24-bit mantissa: a copy, not a trip through float.
  HostTensor big = make(i64, {2}, {0, 0});
  big.as<int64_t>()[0] = (int64_t(1) << 53) + 1;
  big.as<int64_t>()[1] = -((int64_t(1) << 40) + 3);
  HostTensor y;
  ASSERT_OK(run("floor", {&big}, big.desc, &y));
  EXPECT_EQ(y.as<int64_t>()[0], (int64_t(1) << 53) + 1);
  EXPECT_EQ(y.as<int64_t>()[1], -((int64_t(1) << 40) + 3));
  // sign of a bool is the bool (torch.sign).
  HostTensor b = make(i1, {3}, {1, 0, 1});
  ASSERT_OK(run("sign", {&b}, b.desc, &y));
  expectEqual(y, {1, 0, 1}, "sign");
}

TEST_P(KernelTest, LogicalNot) {
  HostTensor x = make(i1, {5}, {1, 0, 0, 1, 1});
  HostTensor y;
  ASSERT_OK(run("not", {&x}, x.desc, &y));
  expectEqual(y, {0, 1, 1, 0, 0});
}

TEST_P(KernelTest, UnaryValidation) {
  expectError(sig("exp", {D(i64, {2})}, D(i64, {2})), {"exp", "i64", "f32"});
  expectError(sig("exp", {D(f16, {2})}, D(f16, {2})),
              {GetParam() + " backend has no f16 kernel for 'exp' yet"});
  expectError(sig("relu", {D(f16, {2})}, D(f16, {2})), {"no f16 kernel for 'relu'"});
  expectError(sig("not", {D(f32, {2})}, D(f32, {2})), {"not", "f32", "i1"});
  expectError(sig("neg", {D(i1, {2})}, D(i1, {2})), {"neg", "i1"});
  // Rounding takes integers but not bools; the float-only maps take neither.
  expectError(sig("floor", {D(i1, {2})}, D(i1, {2})), {"floor", "i1"});
  expectError(sig("tan", {D(i64, {2})}, D(i64, {2})), {"tan", "i64", "f32"});
  expectError(sig("reciprocal", {D(i32, {2})}, D(i32, {2})), {"reciprocal", "i32"});
  expectError(sig("relu", {D(f32, {2, 3})}, D(f32, {3, 2})), {"relu", "output is 3x2xf32", "2x3xf32"});
  expectError(sig("relu", {D(f32, {2, 3})}, D(i64, {2, 3})), {"output is 2x3xi64"});
  expectError(sig("relu", {D(f32, {2}), D(f32, {2})}, D(f32, {2})), {"relu", "expects 1 input, got 2"});
  expectError(sig("relu", {std::nullopt}, D(f32, {2})), {"relu", "missing"});
  expectError(sig("gelu", {D(f32, {2})}, D(f32, {2}), attrs({{"approximation", S("fast")}})),
              {"gelu", "'fast'"});
  expectError(sig("gelu", {D(f32, {2})}, D(f32, {2}), attrs({{"approximation", I(1)}})),
              {"gelu", "approximation", "string"});
  KernelSignature twoOutputs = sig("relu", {D(f32, {2})}, D(f32, {2}));
  twoOutputs.outputs.push_back(D(f32, {2}));
  expectError(twoOutputs, {"relu", "1 output"});
}

//===----------------------------------------------------------------------===//
// Binary elementwise with broadcasting.
//===----------------------------------------------------------------------===//

const std::vector<std::pair<Shape, Shape>> kBroadcastPairs = {
    {{3, 5}, {3, 5}},       {{3, 5}, {}},           {{}, {4, 3}},
    {{2, 3, 7}, {7}},       {{4, 1}, {4, 5}},       {{3, 1, 5}, {1, 4, 1}},
    {{2, 1, 3, 1}, {5, 1, 4}}, {{}, {}},            {{1}, {6}},
    {{2, 3, 4, 5}, {1, 3, 1, 1}}, {{301, 129}, {129}}, {{3, 1, 1}, {3, 200, 70}},
};

Shape outShapeOf(const Shape &a, const Shape &b) { return broadcastShape(a, b); }

void referenceBinary(const HostTensor &a, const HostTensor &b, const Shape &out,
                     const std::function<double(double, double)> &f, std::vector<double> *want) {
  want->resize(numElements(out));
  for (int64_t i = 0; i < numElements(out); ++i)
    (*want)[i] = f(a.at(broadcastOffset(out, a.desc.shape, i)),
                   b.at(broadcastOffset(out, b.desc.shape, i)));
}

TEST_P(KernelTest, FloatBinaryOpsBroadcast) {
  std::vector<std::pair<const char *, std::function<double(double, double)>>> ops = {
      {"add", [](double a, double b) { return (float)a + (float)b; }},
      {"sub", [](double a, double b) { return (float)a - (float)b; }},
      {"mul", [](double a, double b) { return (float)a * (float)b; }},
      {"div", [](double a, double b) { return (float)a / (float)b; }},
      {"maximum", [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](double a, double b) { return std::min(a, b); }},
  };
  for (const auto &[shapeA, shapeB] : kBroadcastPairs) {
    HostTensor a = random(shapeA, -3, 3), b = random(shapeB, 0.5, 3);
    Shape out = outShapeOf(shapeA, shapeB);
    for (const auto &[kernel, f] : ops) {
      HostTensor y;
      ASSERT_OK(run(kernel, {&a, &b}, D(f32, out), &y));
      std::vector<double> want;
      referenceBinary(a, b, out, f, &want);
      expectClose(y, want, 1e-6, 1e-6,
                  std::string(kernel) + " " + describe(shapeA, f32) + " " + describe(shapeB, f32));
    }
  }
}

TEST_P(KernelTest, MaximumMinimumPropagateNaN) {
  HostTensor a = make(f32, {3}, {kNaN, 1, 2}), b = make(f32, {3}, {1, kNaN, 3});
  HostTensor y;
  ASSERT_OK(run("maximum", {&a, &b}, a.desc, &y));
  expectEqual(y, {kNaN, kNaN, 3});
  ASSERT_OK(run("minimum", {&a, &b}, a.desc, &y));
  expectEqual(y, {kNaN, kNaN, 2});
}

TEST_P(KernelTest, PowWithTensorAndScalarExponents) {
  HostTensor a = random({4, 9}, 0.1, 3), e = random({9}, -2, 2);
  HostTensor y;
  ASSERT_OK(run("pow", {&a, &e}, a.desc, &y));
  std::vector<double> want;
  referenceBinary(a, e, {4, 9}, [](double x, double p) { return std::pow(x, p); }, &want);
  expectClose(y, want, 1e-6, 2e-6, "pow tensor");
  for (double p : {2.0, 0.5, 3.0, -1.0}) {
    HostTensor s = make(f32, {}, {p}), x = random({5, 3}, -2, 2);
    ASSERT_OK(run("pow", {&x, &s}, x.desc, &y));
    referenceBinary(x, s, {5, 3}, [](double x, double p) { return std::pow((float)x, p); }, &want);
    expectClose(y, want, 1e-6, 2e-6, "pow scalar " + std::to_string(p));
  }
  // A scalar base broadcast against a tensor exponent.
  HostTensor base = make(f32, {1}, {2}), exps = make(f32, {4}, {0, 1, -1, 10});
  ASSERT_OK(run("pow", {&base, &exps}, D(f32, {4}), &y));
  expectClose(y, {1, 2, 0.5, 1024});
}

TEST_P(KernelTest, IntegerBinaryOps) {
  std::vector<std::pair<const char *, std::function<double(double, double)>>> ops = {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      // Truncating division, as C.
      {"div", [](double a, double b) { return b == 0 ? 0 : std::trunc(a / b); }},
      {"maximum", [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](double a, double b) { return std::min(a, b); }},
  };
  for (DType dt : {i64, i32}) {
    for (const auto &[shapeA, shapeB] : kBroadcastPairs) {
      HostTensor a = randomInts(dt, shapeA, -100, 100), b = randomInts(dt, shapeB, -9, 9);
      Shape out = outShapeOf(shapeA, shapeB);
      for (const auto &[kernel, f] : ops) {
        HostTensor y;
        ASSERT_OK(run(kernel, {&a, &b}, D(dt, out), &y));
        std::vector<double> want;
        referenceBinary(a, b, out, f, &want);
        expectEqual(y, want, std::string(kernel) + " " + dtypeName(dt));
      }
    }
  }
  // -7 / 2 truncates to -3 (not floor's -4); division by zero gives 0.
  HostTensor a = make(i64, {4}, {-7, 7, -7, 5}), b = make(i64, {4}, {2, -2, -2, 0});
  HostTensor y;
  ASSERT_OK(run("div", {&a, &b}, a.desc, &y));
  expectEqual(y, {-3, -3, 3, 0});
}

TEST_P(KernelTest, LogicalAndOr) {
  HostTensor a = randomBools({3, 1, 4}), b = randomBools({5, 1});
  Shape out = {3, 5, 4};
  HostTensor y;
  std::vector<double> want;
  ASSERT_OK(run("and", {&a, &b}, D(i1, out), &y));
  referenceBinary(a, b, out, [](double x, double z) { return x && z; }, &want);
  expectEqual(y, want, "and");
  ASSERT_OK(run("or", {&a, &b}, D(i1, out), &y));
  referenceBinary(a, b, out, [](double x, double z) { return x || z; }, &want);
  expectEqual(y, want, "or");
}

TEST_P(KernelTest, LogicalXorAndNotOnBools) {
  HostTensor a = randomBools({3, 1, 4}), b = randomBools({5, 1});
  Shape out = {3, 5, 4};
  HostTensor y;
  std::vector<double> want;
  ASSERT_OK(run("xor", {&a, &b}, D(i1, out), &y));
  referenceBinary(a, b, out, [](double x, double z) { return (x != 0) != (z != 0); }, &want);
  expectEqual(y, want, "xor");
}

/// Two's-complement bit operations on doubles that hold integers, through int64.
double bitsOf(double a, double b, char op) {
  auto x = static_cast<int64_t>(a), z = static_cast<int64_t>(b);
  return static_cast<double>(op == '&' ? (x & z) : op == '|' ? (x | z) : (x ^ z));
}

TEST_P(KernelTest, BitwiseOpsOnIntegers) {
  for (DType dt : {i64, i32}) {
    for (const auto &[shapeA, shapeB] : kBroadcastPairs) {
      HostTensor a = randomInts(dt, shapeA, -1000, 1000), b = randomInts(dt, shapeB, -1000, 1000);
      Shape out = outShapeOf(shapeA, shapeB);
      for (auto [kernel, op] : {std::pair{"and", '&'}, std::pair{"or", '|'},
                                std::pair{"xor", '^'}}) {
        HostTensor y;
        ASSERT_OK(run(kernel, {&a, &b}, D(dt, out), &y));
        std::vector<double> want;
        referenceBinary(a, b, out, [op = op](double x, double z) { return bitsOf(x, z, op); },
                        &want);
        expectEqual(y, want, std::string(kernel) + " " + dtypeName(dt));
      }
    }
    HostTensor x = make(dt, {5}, {0, -1, 5, -6, 1000}), y;
    ASSERT_OK(run("not", {&x}, x.desc, &y));
    expectEqual(y, {-1, 0, -6, 5, -1001}, std::string("not ") + dtypeName(dt));
  }
  // Floats have no bitwise kernel.
  expectError(sig("xor", {D(f32, {2}), D(f32, {2})}, D(f32, {2})), {"xor", "f32"});
  expectError(sig("not", {D(f32, {2})}, D(f32, {2})), {"not", "f32"});
}

TEST_P(KernelTest, ShiftsTakeOutOfRangeCountsAsPyTorch) {
  // Counts beyond the width (or negative) shift every bit out: 0 to the
  // left, the sign to the right.
  HostTensor a = make(i64, {8}, {1, -1, 5, -5, 3, -3, 7, -8});
  HostTensor b = make(i64, {8}, {3, 3, 1, 1, 64, 64, -1, 63});
  HostTensor y;
  ASSERT_OK(run("shift_left", {&a, &b}, a.desc, &y));
  expectEqual(y, {8, -8, 10, -10, 0, 0, 0, 0}, "shift_left i64");
  ASSERT_OK(run("shift_right", {&a, &b}, a.desc, &y));
  expectEqual(y, {0, -1, 2, -3, 0, -1, 0, -1}, "shift_right i64");
  HostTensor a32 = make(i32, {4}, {1, -16, 1, -16}), b32 = make(i32, {4}, {31, 2, 32, 40});
  ASSERT_OK(run("shift_left", {&a32, &b32}, a32.desc, &y));
  expectEqual(y, {-2147483648.0, -64, 0, 0}, "shift_left i32");
  ASSERT_OK(run("shift_right", {&a32, &b32}, a32.desc, &y));
  expectEqual(y, {0, -4, 0, -1}, "shift_right i32");
  // A broadcast count.
  HostTensor row = make(i64, {2, 3}, {1, 2, 3, -4, -5, -6}), k = make(i64, {3}, {0, 1, 2});
  ASSERT_OK(run("shift_left", {&row, &k}, row.desc, &y));
  expectEqual(y, {1, 4, 12, -4, -10, -24});
  expectError(sig("shift_left", {D(f32, {2}), D(f32, {2})}, D(f32, {2})), {"shift_left", "f32"});
  expectError(sig("shift_right", {D(i1, {2}), D(i1, {2})}, D(i1, {2})), {"shift_right", "i1"});
}

TEST_P(KernelTest, IntegerPowIsExactAndWraps) {
  for (DType dt : {i64, i32}) {
    HostTensor a = make(dt, {9}, {2, -3, 0, 0, 1, -1, -1, 2, 7});
    HostTensor e = make(dt, {9}, {10, 3, 0, 5, -4, -3, -2, -1, 2});
    HostTensor y;
    ASSERT_OK(run("pow", {&a, &e}, a.desc, &y));
    // A negative exponent: 1 for 1, ±1 for -1, 0 otherwise (PyTorch's powi).
    expectEqual(y, {1024, -27, 1, 0, 1, -1, 1, 0, 49}, std::string("pow ") + dtypeName(dt));
  }
  // 3^40 wraps modulo 2^64, as PyTorch's integer multiply.
  HostTensor big = make(i64, {1}, {3}), forty = make(i64, {1}, {40}), y;
  ASSERT_OK(run("pow", {&big, &forty}, big.desc, &y));
  uint64_t wrapped = 1;
  for (int i = 0; i < 40; ++i)
    wrapped *= 3;
  EXPECT_EQ(y.as<int64_t>()[0], static_cast<int64_t>(wrapped));
}

TEST_P(KernelTest, CompareAllPredicatesAndDtypes) {
  std::vector<std::pair<const char *, std::function<bool(double, double)>>> preds = {
      {"eq", [](double a, double b) { return a == b; }},
      {"ne", [](double a, double b) { return a != b; }},
      {"lt", [](double a, double b) { return a < b; }},
      {"le", [](double a, double b) { return a <= b; }},
      {"gt", [](double a, double b) { return a > b; }},
      {"ge", [](double a, double b) { return a >= b; }},
  };
  for (DType dt : {f32, i64, i32, i1}) {
    for (const auto &[shapeA, shapeB] :
         std::vector<std::pair<Shape, Shape>>{{{4, 6}, {4, 6}}, {{3, 1, 5}, {4, 1}}, {{7}, {}}}) {
      // Small value ranges so that equality happens.
      HostTensor a = dt == i1 ? randomBools(shapeA) : randomInts(dt, shapeA, -2, 2);
      HostTensor b = dt == i1 ? randomBools(shapeB) : randomInts(dt, shapeB, -2, 2);
      Shape out = outShapeOf(shapeA, shapeB);
      for (const auto &[pred, f] : preds) {
        HostTensor y;
        ASSERT_OK(run("compare", {&a, &b}, D(i1, out), &y, attrs({{"predicate", S(pred)}})));
        std::vector<double> want;
        referenceBinary(a, b, out, [&f = f](double x, double z) { return f(x, z) ? 1.0 : 0.0; },
                        &want);
        expectEqual(y, want, std::string("compare ") + pred + " " + dtypeName(dt));
      }
    }
  }
  // NaN compares unequal to everything.
  HostTensor n = make(f32, {2}, {kNaN, 1}), one = make(f32, {}, {1});
  HostTensor y;
  ASSERT_OK(run("compare", {&n, &one}, D(i1, {2}), &y, attrs({{"predicate", S("ne")}})));
  expectEqual(y, {1, 0});
  ASSERT_OK(run("compare", {&n, &one}, D(i1, {2}), &y, attrs({{"predicate", S("eq")}})));
  expectEqual(y, {0, 1});
}

TEST_P(KernelTest, BinaryValidation) {
  expectError(sig("add", {D(f32, {2, 3}), D(f32, {4})}, D(f32, {2, 3})),
              {"add", "do not broadcast", "2x3xf32", "4xf32"});
  expectError(sig("add", {D(f32, {2, 4}), D(f32, {4})}, D(f32, {2, 3})),
              {"add: output is 2x3xf32, expected 2x4xf32"});
  expectError(sig("add", {D(f32, {4}), D(i64, {4})}, D(f32, {4})),
              {"add", "different element types"});
  expectError(sig("add", {D(f16, {4}), D(f16, {4})}, D(f16, {4})),
              {GetParam() + " backend has no f16 kernel for 'add' yet"});
  // PyTorch refuses a bool sub; add, mul, maximum and minimum have bool forms.
  expectError(sig("sub", {D(i1, {4}), D(i1, {4})}, D(i1, {4})), {"sub", "i1"});
  expectError(sig("div", {D(i1, {4}), D(i1, {4})}, D(i1, {4})), {"div", "i1"});
  expectError(sig("add", {D(f32, {4}), D(f32, {4}), D(f32, {4})}, D(f32, {4})),
              {"add", "expects 2 inputs, got 3"});
  expectError(sig("pow", {D(i1, {4}), D(i1, {4})}, D(i1, {4})), {"pow", "i1"});
  expectError(sig("and", {D(f32, {4}), D(f32, {4})}, D(f32, {4})), {"and", "f32"});
  expectError(sig("compare", {D(f32, {4}), D(f32, {4})}, D(i1, {4})),
              {"compare", "missing attribute 'predicate'"});
  expectError(sig("compare", {D(f32, {4}), D(f32, {4})}, D(i1, {4}),
                  attrs({{"predicate", S("approx")}})),
              {"compare", "'approx'"});
  expectError(sig("compare", {D(f32, {4}), D(f32, {4})}, D(f32, {4}),
                  attrs({{"predicate", S("eq")}})),
              {"compare", "expected 4xi1"});
}

//===----------------------------------------------------------------------===//
// where, cast, tril/triu.
//===----------------------------------------------------------------------===//

TEST_P(KernelTest, WhereBroadcastsAllThreeOperands) {
  struct Case { Shape c, x, y; };
  std::vector<Case> cases = {
      {{1, 1, 4, 4}, {}, {2, 3, 4, 4}},       // causal masking with a scalar
      {{5, 6}, {5, 6}, {5, 6}},               // no broadcast
      {{3, 1}, {1, 7}, {}},                   // everything stretched
      {{2, 100, 200}, {200}, {2, 100, 1}},    // large, threaded
  };
  for (DType dt : {f32, i64, i32, i1}) {
    for (const Case &c : cases) {
      HostTensor cond = randomBools(c.c);
      HostTensor x = dt == i1 ? randomBools(c.x) : dt == f32 ? random(c.x) : randomInts(dt, c.x, -50, 50);
      HostTensor y = dt == i1 ? randomBools(c.y) : dt == f32 ? random(c.y) : randomInts(dt, c.y, -50, 50);
      Shape out = broadcastShape(broadcastShape(c.c, c.x), c.y);
      HostTensor r;
      ASSERT_OK(run("where", {&cond, &x, &y}, D(dt, out), &r));
      std::vector<double> want(numElements(out));
      for (int64_t i = 0; i < numElements(out); ++i)
        want[i] = cond.at(broadcastOffset(out, c.c, i)) ? x.at(broadcastOffset(out, c.x, i))
                                                        : y.at(broadcastOffset(out, c.y, i));
      expectEqual(r, want, std::string("where ") + dtypeName(dt));
    }
  }
  HostTensor mask = make(i1, {2}, {1, 0}), ninf = make(f32, {}, {-kInf}), s = make(f32, {2}, {3, 4});
  HostTensor r;
  ASSERT_OK(run("where", {&mask, &ninf, &s}, D(f32, {2}), &r));
  expectEqual(r, {-kInf, 4});
  expectError(sig("where", {D(f32, {2}), D(f32, {2}), D(f32, {2})}, D(f32, {2})),
              {"where", "condition", "expected i1"});
  expectError(sig("where", {D(i1, {2}), D(f32, {2}), D(i64, {2})}, D(f32, {2})),
              {"where", "different element types"});
  expectError(sig("where", {D(i1, {3}), D(f32, {2}), D(f32, {2})}, D(f32, {2})),
              {"where", "do not broadcast"});
  expectError(sig("where", {D(i1, {2}), D(f32, {2})}, D(f32, {2})), {"where", "expects 3 inputs"});
  expectError(sig("where", {D(i1, {2, 1}), D(f32, {2}), D(f32, {2})}, D(f32, {2})),
              {"where", "expected 2x2xf32"});
}

TEST_P(KernelTest, CastBetweenAllDtypes) {
  std::vector<double> src = {-2.7, -1.0, -0.5, 0.0, 0.4, 1.0, 2.9, 100.5};
  std::vector<DType> dts = {f32, i64, i32, i1};
  for (DType from : dts) {
    HostTensor x = make(from, {2, 4}, src);
    for (DType to : dts) {
      HostTensor y;
      ASSERT_OK(run("cast", {&x}, D(to, {2, 4}), &y));
      std::vector<double> want;
      for (double v : x.values()) {
        if (to == i1)
          want.push_back(v != 0);
        else if (to == f32)
          want.push_back(static_cast<float>(v));
        else
          want.push_back(std::trunc(v)); // toward zero
      }
      expectEqual(y, want, std::string("cast ") + dtypeName(from) + " -> " + dtypeName(to));
    }
  }
  HostTensor nan = make(f32, {1}, {kNaN}), y;
  ASSERT_OK(run("cast", {&nan}, D(i1, {1}), &y));
  expectEqual(y, {1}); // NaN is non-zero
  // NaN, infinities and values out of range give the integer's minimum, as
  // PyTorch's CPU casts (x86's integer indefinite), on every backend.
  HostTensor odd = make(f32, {5}, {kNaN, kInf, -kInf, 1e20, -1e20});
  ASSERT_OK(run("cast", {&odd}, D(i64, {5}), &y));
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(y.as<int64_t>()[i], std::numeric_limits<int64_t>::min()) << "element " << i;
  ASSERT_OK(run("cast", {&odd}, D(i32, {5}), &y));
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(y.as<int32_t>()[i], std::numeric_limits<int32_t>::min()) << "element " << i;
  expectError(sig("cast", {D(f32, {2, 4})}, D(i64, {8})), {"cast", "output is 8xi64", "2x4xi64"});
  if (GetParam() != "cpu")
    expectError(sig("cast", {D(f32, {2})}, D(f16, {2})), {"no f16 kernel for 'cast'"});
}

TEST_P(KernelTest, CastToAndFromHalfRoundsToNearestEven) {
  if (GetParam() != "cpu")
    GTEST_SKIP() << "f16 casts are a CPU kernel";
  // 2049 lies halfway between 2048 and 2050: ties to even (2048); 65520
  // rounds past the largest f16 (65504) to infinity; 2^-25 is half of the
  // smallest subnormal (ties to 0), 3·2^-26 rounds up to it.
  std::vector<double> src = {1.0, -2.5, 2049, 2051, 65504, 65520, -1e6,
                             std::ldexp(1.0, -25), 3 * std::ldexp(1.0, -26), 0.1};
  HostTensor x = make(f32, {10}, src), h, back;
  ASSERT_OK(run("cast", {&x}, D(f16, {10}), &h));
  ASSERT_OK(run("cast", {&h}, D(f32, {10}), &back));
  expectEqual(back, {1.0, -2.5, 2048, 2052, 65504, kInf, -kInf, 0, std::ldexp(1.0, -24),
                     0.0999755859375});
  // NaN stays NaN; integers and bools go through f32.
  HostTensor nan = make(f32, {1}, {kNaN}), y;
  ASSERT_OK(run("cast", {&nan}, D(f16, {1}), &h));
  ASSERT_OK(run("cast", {&h}, D(f32, {1}), &y));
  EXPECT_TRUE(std::isnan(y.as<float>()[0]));
  HostTensor ints = make(i64, {3}, {-7, 0, 4097});
  ASSERT_OK(run("cast", {&ints}, D(f16, {3}), &h));
  ASSERT_OK(run("cast", {&h}, D(i64, {3}), &y));
  expectEqual(y, {-7, 0, 4096});
  ASSERT_OK(run("cast", {&h}, D(i1, {3}), &y));
  expectEqual(y, {1, 0, 1});
}

TEST_P(KernelTest, TrilAndTriu) {
  for (DType dt : {f32, i64, i32, i1}) {
    for (const Shape &shape : {Shape{4, 4}, Shape{2, 3, 4, 6}, Shape{3, 6, 2}}) {
      for (int64_t diagonal : {-2, -1, 0, 1, 3, 10}) {
        HostTensor x = dt == i1 ? randomBools(shape) : dt == f32 ? random(shape) : randomInts(dt, shape, -9, 9);
        for (bool lower : {true, false}) {
          HostTensor y;
          Attributes a = attrs({{"diagonal", I(diagonal)}});
          ASSERT_OK(run(lower ? "tril" : "triu", {&x}, x.desc, &y, a));
          int64_t rows = shape[shape.size() - 2], cols = shape.back();
          std::vector<double> want(x.numel());
          for (int64_t k = 0; k < x.numel(); ++k) {
            int64_t i = (k / cols) % rows, j = k % cols;
            bool keep = lower ? j - i <= diagonal : j - i >= diagonal;
            want[k] = keep ? x.at(k) : 0;
          }
          expectEqual(y, want, std::string(lower ? "tril " : "triu ") + dtypeName(dt) +
                                   " diagonal " + std::to_string(diagonal));
        }
      }
    }
  }
  // diagonal defaults to 0.
  HostTensor x = make(f32, {2, 2}, {1, 2, 3, 4}), y;
  ASSERT_OK(run("tril", {&x}, x.desc, &y));
  expectEqual(y, {1, 0, 3, 4});
  expectError(sig("tril", {D(f32, {4})}, D(f32, {4})), {"tril", "rank >= 2"});
  expectError(sig("triu", {D(f32, {4, 4})}, D(f32, {4, 4}), attrs({{"diagonal", F(1.5)}})),
              {"triu", "diagonal", "integer"});
}

//===----------------------------------------------------------------------===//
// matmul, linear, embedding.
//===----------------------------------------------------------------------===//

std::vector<double> refMatmul(const HostTensor &a, const HostTensor &b, const Shape &out) {
  const Shape &sa = a.desc.shape, &sb = b.desc.shape;
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  Shape batch(out.begin(), out.end() - 2);
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  std::vector<double> want(numElements(out));
  for (int64_t t = 0; t < numElements(batch); ++t) {
    int64_t oa = broadcastOffset(batch, ba, t) * m * k, ob = broadcastOffset(batch, bb, t) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += a.at(oa + i * k + p) * b.at(ob + p * n + j);
        want[t * m * n + i * n + j] = s;
      }
  }
  return want;
}

TEST_P(KernelTest, MatmulWithBroadcastBatches) {
  struct Case { Shape a, b, out; };
  std::vector<Case> cases = {
      {{5, 7}, {7, 3}, {5, 3}},
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},             // rhs shared: batches fold into rows
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},             // lhs broadcast
      {{2, 1, 3, 4}, {3, 4, 6}, {2, 3, 3, 6}},    // both broadcast
      {{2, 4, 9, 16}, {2, 4, 16, 9}, {2, 4, 9, 9}}, // attention scores
      {{1, 1, 3, 5}, {1, 5, 2}, {1, 1, 3, 2}},
      {{3, 0, 4}, {4, 2}, {3, 0, 2}},             // empty rows
      {{2, 3, 0}, {2, 0, 4}, {2, 3, 4}},          // empty contraction: zeros
  };
  for (const Case &c : cases) {
    HostTensor a = random(c.a), b = random(c.b), y;
    ASSERT_OK(run("matmul", {&a, &b}, D(f32, c.out), &y));
    expectClose(y, refMatmul(a, b, c.out), 1e-4, 1e-4,
                "matmul " + describe(c.a, f32) + " x " + describe(c.b, f32));
  }
  expectError(sig("matmul", {D(f32, {2, 3}), D(f32, {4, 5})}, D(f32, {2, 5})),
              {"matmul", "contraction dims differ", "2x3xf32", "4x5xf32"});
  expectError(sig("matmul", {D(f32, {2, 3, 4}), D(f32, {3, 4, 5})}, D(f32, {2, 3, 5})),
              {"matmul", "batch dims do not broadcast"});
  expectError(sig("matmul", {D(f32, {4}), D(f32, {4, 5})}, D(f32, {5})), {"matmul", "rank >= 2"});
  expectError(sig("matmul", {D(f32, {2, 4}), D(f32, {4, 5})}, D(f32, {2, 4})),
              {"matmul", "output is 2x4xf32, expected 2x5xf32"});
  expectError(sig("matmul", {D(i1, {2, 4}), D(i1, {4, 5})}, D(i1, {2, 5})), {"matmul", "i1"});
  expectError(sig("matmul", {D(f16, {2, 4}), D(f16, {4, 5})}, D(f16, {2, 5})),
              {"no f16 kernel for 'matmul'"});
}

// Integer matmul is exact and wraps on overflow, as PyTorch's; batches
// broadcast as the float kernel's.
TEST_P(KernelTest, IntegerMatmul) {
  struct Case { Shape a, b, out; };
  std::vector<Case> cases = {
      {{5, 7}, {7, 3}, {5, 3}},
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},
      {{2, 1, 3, 4}, {3, 4, 6}, {2, 3, 3, 6}},
      {{2, 3, 0}, {2, 0, 4}, {2, 3, 4}}, // empty contraction: zeros
  };
  for (DType dt : {i64, i32}) {
    for (const Case &c : cases) {
      HostTensor a = randomInts(dt, c.a, -50, 50), b = randomInts(dt, c.b, -50, 50), y;
      ASSERT_OK(run("matmul", {&a, &b}, D(dt, c.out), &y));
      expectEqual(y, refMatmul(a, b, c.out),
                  "matmul " + describe(c.a, dt) + " x " + describe(c.b, dt));
    }
  }
  // 2^62 * 4 + 1 * 1 wraps to 1 in i64.
  HostTensor a = make(i64, {1, 2}, {4, 1}), b = make(i64, {2, 1}, {double(int64_t(1) << 62), 1});
  HostTensor y;
  ASSERT_OK(run("matmul", {&a, &b}, D(i64, {1, 1}), &y));
  expectEqual(y, {1});
}

// On bools add and maximum are `or`, mul and minimum are `and` (PyTorch's
// results, which stay bool).
TEST_P(KernelTest, BoolArithmetic) {
  HostTensor a = randomBools({3, 1, 4}), b = randomBools({5, 1});
  Shape out = {3, 5, 4};
  std::vector<std::pair<const char *, std::function<double(double, double)>>> ops = {
      {"add", [](double x, double z) { return x || z; }},
      {"maximum", [](double x, double z) { return x || z; }},
      {"mul", [](double x, double z) { return x && z; }},
      {"minimum", [](double x, double z) { return x && z; }},
  };
  for (const auto &[kernel, f] : ops) {
    HostTensor y;
    ASSERT_OK(run(kernel, {&a, &b}, D(i1, out), &y));
    std::vector<double> want;
    referenceBinary(a, b, out, f, &want);
    expectEqual(y, want, std::string(kernel) + " i1");
  }
}

/// x [m, k] times the transpose of w [n, k], plus b [n] when given, in double.
std::vector<double> referenceLinear(const HostTensor &x, const HostTensor &w, const HostTensor *b,
                                    int64_t m, int64_t n, int64_t k) {
  std::vector<double> want(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = b ? b->at(j) : 0;
      for (int64_t p = 0; p < k; ++p)
        sum += x.at(i * k + p) * w.at(j * k + p);
      want[i * n + j] = sum;
    }
  return want;
}

TEST_P(KernelTest, LinearWithAndWithoutBias) {
  for (const Shape &xs : {Shape{2, 5, 7}, Shape{7}, Shape{33, 7}}) {
    const int64_t n = 6, k = 7;
    HostTensor x = random(xs), w = random({n, k}), b = random({n});
    Shape out = xs;
    out.back() = n;
    int64_t m = x.numel() / k;
    for (bool withBias : {false, true}) {
      HostTensor y;
      if (withBias)
        ASSERT_OK(run("linear", {&x, &w, &b}, D(f32, out), &y));
      else
        ASSERT_OK(run("linear", {&x, &w}, D(f32, out), &y));
      expectClose(y, referenceLinear(x, w, withBias ? &b : nullptr, m, n, k), 1e-4, 1e-4,
                  "linear " + describe(xs, f32));
    }
  }
  // An absent bias may also be an explicit nullopt slot.
  HostTensor x = random({3, 4}), w = random({2, 4}), y;
  ASSERT_OK(run("linear", {&x, &w, nullptr}, D(f32, {3, 2}), &y));
  expectError(sig("linear", {D(f32, {3, 4}), D(f32, {2, 5})}, D(f32, {3, 2})),
              {"linear", "4 features", "2x5xf32"});
  expectError(sig("linear", {D(f32, {3, 4}), D(f32, {2, 4}), D(f32, {3})}, D(f32, {3, 2})),
              {"linear", "bias 3xf32", "[2]"});
  expectError(sig("linear", {D(f32, {3, 4}), std::nullopt}, D(f32, {3, 2})),
              {"linear", "weight", "missing"});
  expectError(sig("linear", {D(f32, {3, 4})}, D(f32, {3, 2})), {"linear", "expects 2 to 3 inputs"});
  expectError(sig("linear", {D(f32, {3, 4}), D(f32, {4})}, D(f32, {3, 2})), {"linear", "2-D weight"});
  expectError(sig("linear", {D(f32, {3, 4}), D(f32, {2, 4})}, D(f32, {3, 4})),
              {"linear", "output is 3x4xf32, expected 3x2xf32"});
}

// A forward-only program's linear owns its weight: oneDNN's matmul primitive
// where the shape takes it (the weight prepacked in place by the first of
// two calls: outputs a multiple of 64, features of 16), dnnl_sgemm where its
// blocked format would pad the weight (1000 or 48 outputs, 7 features).
TEST_P(KernelTest, LinearWithAnOwnedWeight) {
  struct Case {
    Shape x;
    int64_t n;
  };
  for (const Case &c : {Case{{197, 96}, 128}, Case{{2, 33, 64}, 128}, Case{{2, 64}, 1000},
                        Case{{33, 64}, 48}, Case{{5, 7}, 6}}) {
    const int64_t k = c.x.back(), n = c.n;
    HostTensor x = random(c.x), w = random({n, k}), b = random({n});
    Shape out = c.x;
    out.back() = n;
    const int64_t m = x.numel() / k;
    for (bool withBias : {false, true}) {
      std::vector<const HostTensor *> inputs = {&x, &w};
      std::vector<std::optional<TensorDesc>> descs = {x.desc, w.desc};
      if (withBias) {
        inputs.push_back(&b);
        descs.push_back(b.desc);
      }
      KernelSignature s = sig("linear", descs, D(f32, out));
      s.ownedConstants = {false, true, false};
      HostTensor y;
      ASSERT_OK(run(s, inputs, &y, /*calls=*/2));
      expectClose(y, referenceLinear(x, w, withBias ? &b : nullptr, m, n, k), 1e-4, 1e-4,
                  "linear, owned weight, " + describe(c.x, f32) + (withBias ? ", bias" : ""));
    }
  }
}

// A large output whose rows are not a multiple of 16 bytes (an odd
// vocabulary): the CUDA backend computes it into a padded buffer and copies.
TEST_P(KernelTest, LinearWithUnalignedLargeOutput) {
  const int64_t m = 1024, n = 1025, k = 16;
  HostTensor x = random({m, k}), w = random({n, k}), b = random({n}), y;
  ASSERT_OK(run("linear", {&x, &w, &b}, D(f32, {m, n}), &y));
  expectClose(y, referenceLinear(x, w, &b, m, n, k), 1e-4, 1e-4, "linear 1024x16 by 1025x16");
}

TEST_P(KernelTest, EmbeddingLooksUpRows) {
  HostTensor table = random({10, 6});
  for (DType dt : {i64, i32}) {
    HostTensor idx = randomInts(dt, {2, 3, 5}, 0, 9), y;
    ASSERT_OK(run("embedding", {&table, &idx}, D(f32, {2, 3, 5, 6}), &y));
    std::vector<double> want;
    for (int64_t i = 0; i < idx.numel(); ++i)
      for (int64_t j = 0; j < 6; ++j)
        want.push_back(table.at(static_cast<int64_t>(idx.at(i)) * 6 + j));
    expectEqual(y, want, std::string("embedding ") + dtypeName(dt));
  }
  // An index outside the table is a runtime error naming it and its position.
  HostTensor bad = make(i64, {4}, {1, 2, 10, 3}), y;
  Status s = run("embedding", {&table, &bad}, D(f32, {4, 6}), &y);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("index 10"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("position 2"), std::string::npos) << s.message();
  HostTensor negative = make(i32, {2}, {-1, 0});
  s = run("embedding", {&table, &negative}, D(f32, {2, 6}), &y);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("index -1"), std::string::npos) << s.message();
  expectError(sig("embedding", {D(f32, {10}), D(i64, {3})}, D(f32, {3, 10})),
              {"embedding", "2-D"});
  expectError(sig("embedding", {D(f32, {10, 4}), D(f32, {3})}, D(f32, {3, 4})),
              {"embedding", "indices", "f32"});
  expectError(sig("embedding", {D(f32, {10, 4}), D(i64, {3})}, D(f32, {4, 3})),
              {"embedding", "expected 3x4xf32"});
}

//===----------------------------------------------------------------------===//
// gather and scatter.
//===----------------------------------------------------------------------===//

/// torch.gather by its definition: out[p] = x[p with dim = index[p]].
std::vector<double> gatherReference(const HostTensor &x, const HostTensor &index, int64_t dim) {
  std::vector<double> out;
  for (int64_t i = 0; i < index.numel(); ++i) {
    std::vector<int64_t> p = unravel(i, index.desc.shape);
    p[dim] = static_cast<int64_t>(index.at(i));
    out.push_back(x.at(ravel(p, x.desc.shape)));
  }
  return out;
}

TEST_P(KernelTest, GatherAlongEachDim) {
  HostTensor x = random({3, 4, 5}, -4, 4);
  for (DType it : {i64, i32})
    for (int64_t dim = 0; dim < 3; ++dim) {
      // The index is smaller than the input outside dim, longer along it.
      Shape is = {2, 3, 4};
      is[dim] = 7;
      HostTensor index = randomInts(it, is, 0, x.desc.shape[dim] - 1), y;
      ASSERT_OK(run("gather", {&x, &index}, D(f32, is), &y, attrs({{"dim", I(dim)}})));
      expectEqual(y, gatherReference(x, index, dim),
                  "gather dim " + std::to_string(dim) + " " + dtypeName(it));
    }
  // Integers and bools move unchanged (values beyond 2^53 included).
  HostTensor big = make(i64, {2, 2}, {9007199254740993.0, -5, 7, 1});
  big.as<int64_t>()[0] = (int64_t(1) << 53) + 1;
  HostTensor index = make(i64, {2, 3}, {1, 0, 0, 1, 1, 0}), y;
  ASSERT_OK(run("gather", {&big, &index}, D(i64, {2, 3}), &y, attrs({{"dim", I(1)}})));
  EXPECT_EQ(y.as<int64_t>()[1], (int64_t(1) << 53) + 1);
  EXPECT_EQ(y.as<int64_t>()[0], -5);
  EXPECT_EQ(y.as<int64_t>()[5], 7);
  HostTensor mask = make(i1, {4}, {1, 0, 0, 1}), picks = make(i32, {5}, {3, 1, 0, 2, 3}), m;
  ASSERT_OK(run("gather", {&mask, &picks}, D(i1, {5}), &m, attrs({{"dim", I(0)}})));
  expectEqual(m, {1, 0, 1, 0, 1}, "gather of i1");
  // 0-d input and index.
  HostTensor scalar = make(f32, {}, {2.5}), zero = make(i64, {}, {0}), s;
  ASSERT_OK(run("gather", {&scalar, &zero}, D(f32, {}), &s, attrs({{"dim", I(0)}})));
  expectEqual(s, {2.5}, "0-d gather");
}

TEST_P(KernelTest, GatherRejectsBadIndicesNamingTheOp) {
  HostTensor x = random({3, 4});
  for (double bad : {4.0, -1.0}) {
    HostTensor index = make(i64, {3, 2}, {0, 1, 2, bad, 3, 0}), y;
    Status s = run("gather", {&x, &index}, D(f32, {3, 2}), &y, attrs({{"dim", I(1)}}));
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("gather"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("index " + std::to_string(static_cast<int64_t>(bad))),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("position 3"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("size 4"), std::string::npos) << s.message();
  }
  expectError(sig("gather", {D(f32, {3, 4}), D(i64, {3})}, D(f32, {3}), attrs({{"dim", I(0)}})),
              {"gather", "rank"});
  expectError(sig("gather", {D(f32, {3, 4}), D(i64, {4, 2})}, D(f32, {4, 2}),
                  attrs({{"dim", I(1)}})),
              {"gather", "larger than the input", "dim 0"});
  expectError(sig("gather", {D(f32, {3, 4}), D(f32, {3, 2})}, D(f32, {3, 2}),
                  attrs({{"dim", I(1)}})),
              {"gather", "index", "f32"});
  expectError(sig("gather", {D(f32, {3, 4}), D(i64, {3, 2})}, D(f32, {3, 2}),
                  attrs({{"dim", I(2)}})),
              {"gather", "dim"});
  expectError(sig("gather", {D(f32, {3, 4}), D(i64, {3, 2})}, D(f32, {2, 3}),
                  attrs({{"dim", I(1)}})),
              {"gather", "expected 3x2xf32"});
}

/// scatter_reduce by its definition, serially in index order.
std::vector<double> scatterReference(const HostTensor &x, const HostTensor &index,
                                     const HostTensor &src, int64_t dim, const std::string &kind,
                                     bool includeSelf, bool integer) {
  std::vector<double> out = x.values();
  std::vector<int64_t> count(out.size(), 0);
  for (int64_t i = 0; i < index.numel(); ++i) {
    std::vector<int64_t> p = unravel(i, index.desc.shape);
    p[dim] = static_cast<int64_t>(index.at(i));
    int64_t o = ravel(p, x.desc.shape);
    double v = src.at(i);
    if (kind == "none") {
      out[o] = v;
      continue;
    }
    if (count[o]++ == 0 && !includeSelf) {
      out[o] = v;
      continue;
    }
    if (kind == "sum" || kind == "mean")
      out[o] += v;
    else if (kind == "prod")
      out[o] *= v;
    else if (kind == "amax")
      out[o] = std::isnan(out[o]) || std::isnan(v) ? NAN : std::max(out[o], v);
    else
      out[o] = std::isnan(out[o]) || std::isnan(v) ? NAN : std::min(out[o], v);
  }
  if (kind == "mean")
    for (size_t o = 0; o < out.size(); ++o)
      if (count[o] > 0) {
        double n = static_cast<double>(count[o] + (includeSelf ? 1 : 0));
        out[o] = integer ? std::floor(out[o] / n) : out[o] / n;
      }
  return out;
}

TEST_P(KernelTest, ScatterReducesAlongEachDimWithDuplicates) {
  for (const char *kind : {"none", "sum", "prod", "mean", "amax", "amin"})
    for (bool includeSelf : {true, false})
      for (int64_t dim = 0; dim < 3; ++dim) {
        HostTensor x = random({3, 4, 5}, -2, 2);
        Shape is = {2, 3, 4};
        is[dim] = 6; // more entries than positions: duplicates
        HostTensor index = randomInts(i64, is, 0, x.desc.shape[dim] - 1);
        HostTensor src = random(is, -2, 2), y;
        ASSERT_OK(run("scatter", {&x, &index, &src}, D(f32, {3, 4, 5}), &y,
                      attrs({{"dim", I(dim)}, {"reduce", S(kind)},
                             {"include_self", B(includeSelf)}})));
        expectClose(y, scatterReference(x, index, src, dim, kind, includeSelf, false), 1e-5,
                    1e-5,
                    std::string("scatter ") + kind + (includeSelf ? "" : " without self") +
                        " dim " + std::to_string(dim));
      }
}

TEST_P(KernelTest, ScatterOverwriteKeepsTheLastWrite) {
  // PyTorch's CPU order: index order, the last write to an element wins.
  HostTensor x = make(f32, {3}, {9, 9, 9}), index = make(i64, {5}, {0, 2, 0, 2, 0});
  HostTensor src = make(f32, {5}, {1, 2, 3, 4, 5}), y;
  ASSERT_OK(run("scatter", {&x, &index, &src}, D(f32, {3}), &y, attrs({{"dim", I(0)}})));
  expectEqual(y, {5, 9, 4}, "scatter none");
  ASSERT_OK(run("scatter", {&x, &index, &src}, D(f32, {3}), &y,
                attrs({{"dim", I(0)}, {"reduce", S("sum")}})));
  expectEqual(y, {18, 9, 15}, "scatter sum");
  // NaN propagates through amax and amin, from src and from self.
  HostTensor nanSrc = make(f32, {5}, {1, NAN, 3, 4, 5}), nanSelf = make(f32, {3}, {NAN, 0, 0});
  ASSERT_OK(run("scatter", {&x, &index, &nanSrc}, D(f32, {3}), &y,
                attrs({{"dim", I(0)}, {"reduce", S("amax")}})));
  expectEqual(y, {9, 9, NAN}, "scatter amax NaN");
  ASSERT_OK(run("scatter", {&nanSelf, &index, &src}, D(f32, {3}), &y,
                attrs({{"dim", I(0)}, {"reduce", S("amin")}})));
  expectEqual(y, {NAN, 0, 0}, "scatter amin NaN self");
}

TEST_P(KernelTest, ScatterIntegersAndBools) {
  // Integer mean rounds toward -inf (PyTorch's floor division): -3 / 2 = -2.
  HostTensor x = make(i64, {2}, {0, 7}), index = make(i32, {3}, {0, 0, 1});
  HostTensor src = make(i64, {3}, {-3, 0, 4}), y;
  ASSERT_OK(run("scatter", {&x, &index, &src}, D(i64, {2}), &y,
                attrs({{"dim", I(0)}, {"reduce", S("mean")}, {"include_self", B(false)}})));
  expectEqual(y, {-2, 4}, "i64 mean without self");
  ASSERT_OK(run("scatter", {&x, &index, &src}, D(i64, {2}), &y,
                attrs({{"dim", I(0)}, {"reduce", S("mean")}})));
  expectEqual(y, {-1, 5}, "i64 mean with self"); // floor(-3 / 3), floor(11 / 2)
  HostTensor x32 = make(i32, {2}, {2, 3}), src32 = make(i32, {3}, {5, -1, 4}), y32;
  ASSERT_OK(run("scatter", {&x32, &index, &src32}, D(i32, {2}), &y32,
                attrs({{"dim", I(0)}, {"reduce", S("prod")}})));
  expectEqual(y32, {-10, 12}, "i32 prod");
  // Bools add as `or` and multiply as `and`.
  HostTensor b = make(i1, {2}, {0, 1}), bsrc = make(i1, {3}, {1, 0, 0}), by;
  ASSERT_OK(run("scatter", {&b, &index, &bsrc}, D(i1, {2}), &by,
                attrs({{"dim", I(0)}, {"reduce", S("sum")}})));
  expectEqual(by, {1, 1}, "i1 sum");
  ASSERT_OK(run("scatter", {&b, &index, &bsrc}, D(i1, {2}), &by,
                attrs({{"dim", I(0)}, {"reduce", S("prod")}})));
  expectEqual(by, {0, 0}, "i1 prod");
  ASSERT_OK(run("scatter", {&b, &index, &bsrc}, D(i1, {2}), &by, attrs({{"dim", I(0)}})));
  expectEqual(by, {0, 0}, "i1 overwrite");
}

TEST_P(KernelTest, ScatterRejectsBadIndicesNamingTheOp) {
  HostTensor x = random({2, 3}), src = random({2, 2}), y;
  HostTensor index = make(i64, {2, 2}, {0, 1, 3, 0});
  Status s = run("scatter", {&x, &index, &src}, D(f32, {2, 3}), &y, attrs({{"dim", I(1)}}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("scatter"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("index 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("size 3"), std::string::npos) << s.message();
  expectError(sig("scatter", {D(f32, {2, 3}), D(i64, {2, 2}), D(f32, {2, 3})}, D(f32, {2, 3}),
                  attrs({{"dim", I(1)}})),
              {"scatter", "src", "index's shape"});
  expectError(sig("scatter", {D(f32, {2, 3}), D(i64, {2, 2}), D(i64, {2, 2})}, D(f32, {2, 3}),
                  attrs({{"dim", I(1)}})),
              {"scatter", "src"});
  expectError(sig("scatter", {D(f32, {2, 3}), D(i64, {2, 2}), D(f32, {2, 2})}, D(f32, {2, 3}),
                  attrs({{"dim", I(1)}, {"reduce", S("median")}})),
              {"scatter", "unknown reduce 'median'"});
  expectError(sig("scatter", {D(i1, {2, 3}), D(i64, {2, 2}), D(i1, {2, 2})}, D(i1, {2, 3}),
                  attrs({{"dim", I(1)}, {"reduce", S("mean")}})),
              {"scatter", "mean of i1"});
}

//===----------------------------------------------------------------------===//
// Normalizations and softmax.
//===----------------------------------------------------------------------===//

TEST_P(KernelTest, LayerNormOverTrailingDims) {
  struct Case { Shape x; Ints normalized; };
  for (const Case &c : {Case{{2, 5, 16}, {16}}, Case{{3, 4, 6}, {4, 6}}, Case{{7}, {7}},
                        Case{{300, 130}, {130}}}) {
    HostTensor x = random(c.x, -3, 5);
    HostTensor w = random(c.normalized), b = random(c.normalized);
    const int64_t d = numElements(c.normalized), rows = x.numel() / d;
    for (int affine = 0; affine < 4; ++affine) {
      const HostTensor *wp = affine & 1 ? &w : nullptr, *bp = affine & 2 ? &b : nullptr;
      HostTensor y;
      ASSERT_OK(run("layer_norm", {&x, wp, bp}, x.desc, &y,
                    attrs({{"normalized_shape", L(c.normalized)}, {"eps", F(1e-5)}})));
      std::vector<double> want(x.numel());
      for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; ++i)
          mean += x.at(r * d + i);
        mean /= d;
        for (int64_t i = 0; i < d; ++i)
          var += (x.at(r * d + i) - mean) * (x.at(r * d + i) - mean);
        var /= d;
        for (int64_t i = 0; i < d; ++i)
          want[r * d + i] = (x.at(r * d + i) - mean) / std::sqrt(var + 1e-5) *
                                (wp ? w.at(i) : 1) + (bp ? b.at(i) : 0);
      }
      expectClose(y, want, 1e-5, 1e-4, "layer_norm " + describe(c.x, f32) + " affine " +
                                             std::to_string(affine));
    }
  }
  // eps may be written as an integer.
  HostTensor x = random({2, 3}), y;
  ASSERT_OK(run("layer_norm", {&x, nullptr, nullptr}, x.desc, &y,
                attrs({{"normalized_shape", L({3})}, {"eps", I(0)}})));
  Attributes a = attrs({{"normalized_shape", L({8})}, {"eps", F(1e-5)}});
  expectError(sig("layer_norm", {D(f32, {2, 4}), std::nullopt, std::nullopt}, D(f32, {2, 4}), a),
              {"layer_norm", "normalized_shape [8]", "trailing dims", "2x4xf32"});
  expectError(sig("layer_norm", {D(f32, {2, 8}), D(f32, {4}), std::nullopt}, D(f32, {2, 8}), a),
              {"layer_norm", "weight is 4xf32", "expected 8xf32"});
  expectError(sig("layer_norm", {D(f32, {2, 8}), std::nullopt, D(f32, {8, 1})}, D(f32, {2, 8}), a),
              {"layer_norm", "bias"});
  expectError(sig("layer_norm", {D(f32, {2, 8})}, D(f32, {2, 8}), a),
              {"layer_norm", "expects 3 inputs, got 1"});
  expectError(sig("layer_norm", {D(f32, {2, 8}), std::nullopt, std::nullopt}, D(f32, {2, 8}),
                  attrs({{"normalized_shape", L({8})}})),
              {"layer_norm", "missing attribute 'eps'"});
  // A negative eps is taken, as PyTorch: [1, -1] has variance 1, so eps
  // -0.5 scales each row by 1 / sqrt(0.5).
  {
    HostTensor x = make(f32, {2, 2}, {1, -1, 2, 0}), y;
    ASSERT_OK(run(sig("layer_norm", {x.desc, std::nullopt, std::nullopt}, x.desc,
                      attrs({{"normalized_shape", L({2})}, {"eps", F(-0.5)}})),
                  {&x, nullptr, nullptr}, &y));
    expectClose(y, {std::sqrt(2.0), -std::sqrt(2.0), std::sqrt(2.0), -std::sqrt(2.0)}, 1e-5, 1e-5);
  }
  expectError(sig("layer_norm", {D(f32, {2, 8}), std::nullopt, std::nullopt}, D(f32, {2, 8}),
                  attrs({{"normalized_shape", I(8)}, {"eps", F(1e-5)}})),
              {"layer_norm", "normalized_shape", "list of integers"});
}

TEST_P(KernelTest, BatchNormInference) {
  for (const Shape &shape : {Shape{2, 3, 4, 5}, Shape{4, 6}, Shape{8, 64, 9, 9}}) {
    int64_t c = shape[1];
    HostTensor x = random(shape), mean = random({c}), var = random({c}, 0.1, 2);
    HostTensor w = random({c}), b = random({c});
    int64_t inner = x.numel() / (shape[0] * c);
    for (int affine = 0; affine < 4; ++affine) {
      const HostTensor *wp = affine & 1 ? &w : nullptr, *bp = affine & 2 ? &b : nullptr;
      HostTensor y;
      ASSERT_OK(run("batch_norm", {&x, &mean, &var, wp, bp}, x.desc, &y,
                    attrs({{"eps", F(1e-3)}})));
      std::vector<double> want(x.numel());
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t ch = (i / inner) % c;
        want[i] = (x.at(i) - mean.at(ch)) / std::sqrt(var.at(ch) + 1e-3) * (wp ? w.at(ch) : 1) +
                  (bp ? b.at(ch) : 0);
      }
      expectClose(y, want, 1e-5, 1e-5, "batch_norm " + describe(shape, f32));
    }
  }
  Attributes a = attrs({{"eps", F(1e-5)}});
  expectError(sig("batch_norm", {D(f32, {2, 3, 4}), std::nullopt, D(f32, {3}), std::nullopt,
                                 std::nullopt},
                  D(f32, {2, 3, 4}), a),
              {"batch_norm", "mean", "missing"});
  expectError(sig("batch_norm", {D(f32, {2, 3, 4}), D(f32, {3}), D(f32, {4}), std::nullopt,
                                 std::nullopt},
                  D(f32, {2, 3, 4}), a),
              {"batch_norm", "var is 4xf32", "expected 3xf32"});
  expectError(sig("batch_norm", {D(f32, {3}), D(f32, {3}), D(f32, {3}), std::nullopt, std::nullopt},
                  D(f32, {3}), a),
              {"batch_norm", "[N, C, ...]"});
  expectError(sig("batch_norm", {D(f32, {2, 3}), D(f32, {3}), D(f32, {3})}, D(f32, {2, 3}), a),
              {"batch_norm", "expects 5 inputs, got 3"});
  expectError(sig("batch_norm", {D(f32, {2, 3}), D(f32, {3}), D(f32, {3}), std::nullopt,
                                 std::nullopt},
                  D(f32, {2, 3})),
              {"batch_norm", "missing attribute 'eps'"});
}

std::vector<double> refSoftmax(const HostTensor &x, int64_t dim, bool log) {
  const Shape &s = x.desc.shape;
  int64_t d = s[dim], inner = 1;
  for (size_t i = dim + 1; i < s.size(); ++i)
    inner *= s[i];
  int64_t outer = x.numel() / std::max<int64_t>(d * inner, 1);
  std::vector<double> want(x.numel());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double mx = -kInf, sum = 0;
      for (int64_t k = 0; k < d; ++k)
        mx = std::max(mx, x.at((o * d + k) * inner + j));
      for (int64_t k = 0; k < d; ++k)
        sum += std::exp(x.at((o * d + k) * inner + j) - mx);
      for (int64_t k = 0; k < d; ++k) {
        double v = x.at((o * d + k) * inner + j);
        want[(o * d + k) * inner + j] = log ? v - mx - std::log(sum) : std::exp(v - mx) / sum;
      }
    }
  return want;
}

TEST_P(KernelTest, SoftmaxAndLogSoftmaxAlongAnyDim) {
  struct Case { Shape shape; int64_t dim; };
  for (const Case &c : {Case{{3, 5, 7}, 2}, Case{{3, 5, 7}, 1}, Case{{3, 5, 7}, 0}, Case{{11}, 0},
                        Case{{2, 4, 64, 65}, 3}, Case{{2, 300, 300}, 1}}) {
    HostTensor x = random(c.shape, -20, 20);
    for (bool log : {false, true}) {
      HostTensor y;
      ASSERT_OK(run(log ? "log_softmax" : "softmax", {&x}, x.desc, &y, attrs({{"dim", I(c.dim)}})));
      expectClose(y, refSoftmax(x, c.dim, log), 1e-6, 1e-5,
                  std::string(log ? "log_softmax " : "softmax ") + describe(c.shape, f32) +
                      " dim " + std::to_string(c.dim));
    }
  }
  // Masked (-inf) entries get probability 0; huge logits do not overflow.
  HostTensor x = make(f32, {2, 3}, {-kInf, 0, 1000, -kInf, -kInf, 5}), y;
  ASSERT_OK(run("softmax", {&x}, x.desc, &y, attrs({{"dim", I(1)}})));
  expectClose(y, {0, 0, 1, 0, 0, 1});
  ASSERT_OK(run("log_softmax", {&x}, x.desc, &y, attrs({{"dim", I(1)}})));
  expectClose(y, {-kInf, -1000, 0, -kInf, -kInf, 0});
  expectError(sig("softmax", {D(f32, {2, 3})}, D(f32, {2, 3}), attrs({{"dim", I(2)}})),
              {"softmax", "dim 2 is out of range for rank 2"});
  expectError(sig("softmax", {D(f32, {2, 3})}, D(f32, {2, 3})),
              {"softmax", "missing attribute 'dim'"});
  expectError(sig("log_softmax", {D(i64, {2, 3})}, D(i64, {2, 3}), attrs({{"dim", I(0)}})),
              {"log_softmax", "i64"});
  expectError(sig("softmax", {D(f32, {2, 3})}, D(f32, {2, 3}), attrs({{"dim", S("1")}})),
              {"softmax", "'dim' must be an integer"});
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

TEST_P(KernelTest, ReductionsOverDimSets) {
  struct Case { Shape shape; Ints dims; };
  std::vector<Case> cases = {
      {{4, 6}, {1}},        {{4, 6}, {0}},         {{3, 4, 5}, {1}},      {{3, 4, 5}, {0, 2}},
      {{3, 4, 5}, {0, 1, 2}}, {{2, 3, 4, 5}, {1, 3}}, {{2, 3, 4, 5}, {0, 2}}, {{5, 1, 3}, {1}},
      {{4, 6}, {}},         {{300, 200}, {1}},     {{300, 200}, {0}},     {{7}, {0}},
      {{2, 1, 3, 1}, {0, 3}},
      // Few long outputs, which the CUDA backend reduces in chunks (rows of more than 16384,
      // columns of at least 64), and an empty one.
      {{2, 40000}, {1}},    {{70001}, {0}},        {{3, 20000, 5}, {1}},  {{4100, 7}, {0}},
      {{0, 40000}, {1}},
  };
  for (const Case &c : cases) {
    for (bool keepdim : {false, true}) {
      Shape out;
      for (size_t d = 0; d < c.shape.size(); ++d) {
        bool reduced = std::find(c.dims.begin(), c.dims.end(), int64_t(d)) != c.dims.end();
        if (!reduced)
          out.push_back(c.shape[d]);
        else if (keepdim)
          out.push_back(1);
      }
      // Map each input element to its output element.
      auto outIndex = [&](int64_t flat) {
        std::vector<int64_t> idx = unravel(flat, c.shape), o;
        for (size_t d = 0; d < c.shape.size(); ++d) {
          bool reduced = std::find(c.dims.begin(), c.dims.end(), int64_t(d)) != c.dims.end();
          if (!reduced)
            o.push_back(idx[d]);
          else if (keepdim)
            o.push_back(0);
        }
        return ravel(o, out);
      };
      int64_t count = 1;
      for (int64_t d : c.dims)
        count *= c.shape[d];
      Attributes a = attrs({{"dims", L(c.dims)}, {"keepdim", B(keepdim)}});
      std::string what = describe(c.shape, f32) + " dims " + std::to_string(c.dims.size()) +
                         (keepdim ? " keepdim" : "");
      for (DType dt : {f32, i64, i32}) {
        HostTensor x = dt == f32 ? random(c.shape, -5, 5) : randomInts(dt, c.shape, -1000, 1000);
        // Long sums of floats: small integers, whose partial sums f32 holds exactly in any
        // order, so chunked and sequential sums must agree to the last bit.
        if (dt == f32 && x.numel() > 10000)
          for (int64_t i = 0; i < x.numel(); ++i)
            x.as<float>()[i] = std::round(x.as<float>()[i]);
        std::vector<double> sum(numElements(out), 0), mx(numElements(out), -kInf);
        for (int64_t i = 0; i < x.numel(); ++i) {
          sum[outIndex(i)] += x.at(i);
          mx[outIndex(i)] = std::max(mx[outIndex(i)], x.at(i));
        }
        HostTensor y;
        ASSERT_OK(run("reduce_sum", {&x}, D(dt, out), &y, a));
        expectClose(y, sum, dt == f32 ? 1e-4 : 0, dt == f32 ? 1e-5 : 0, "reduce_sum " + what);
        ASSERT_OK(run("reduce_max", {&x}, D(dt, out), &y, a));
        expectEqual(y, mx, "reduce_max " + what);
        if (dt == f32) {
          std::vector<double> mean = sum;
          for (double &v : mean)
            v /= count;
          ASSERT_OK(run("reduce_mean", {&x}, D(dt, out), &y, a));
          expectClose(y, mean, 1e-5, 1e-5, "reduce_mean " + what);
        }
      }
    }
  }
  // keepdim defaults to false; max propagates NaN.
  HostTensor x = make(f32, {2, 3}, {1, kNaN, 3, -4, -5, -6}), y;
  ASSERT_OK(run("reduce_max", {&x}, D(f32, {2}), &y, attrs({{"dims", L({1})}})));
  expectEqual(y, {kNaN, -4});
  ASSERT_OK(run("reduce_max", {&x}, D(f32, {3}), &y, attrs({{"dims", L({0})}})));
  expectEqual(y, {1, kNaN, 3});
  // ... also from inside a chunk of a long row or column.
  HostTensor row = random({2, 40000}, -5, 5), column = random({4100, 3}, -5, 5);
  row.as<float>()[40000 + 23456] = kNaN;
  column.as<float>()[3 * 2000 + 1] = kNaN;
  ASSERT_OK(run("reduce_max", {&row}, D(f32, {2}), &y, attrs({{"dims", L({1})}})));
  EXPECT_FALSE(std::isnan(y.at(0)));
  EXPECT_TRUE(std::isnan(y.at(1)));
  ASSERT_OK(run("reduce_max", {&column}, D(f32, {3}), &y, attrs({{"dims", L({0})}})));
  EXPECT_FALSE(std::isnan(y.at(0)));
  EXPECT_TRUE(std::isnan(y.at(1)));
  EXPECT_FALSE(std::isnan(y.at(2)));
}

TEST_P(KernelTest, ReductionValidation) {
  expectError(sig("reduce_sum", {D(f32, {2, 3})}, D(f32, {2}), attrs({{"dims", L({2})}})),
              {"reduce_sum", "dim 2 is out of range for rank 2"});
  expectError(sig("reduce_sum", {D(f32, {2, 3})}, D(f32, {2}), attrs({{"dims", L({1, 1})}})),
              {"reduce_sum", "appears twice"});
  expectError(sig("reduce_sum", {D(f32, {2, 3})}, D(f32, {2}),
                  attrs({{"dims", L({1})}, {"keepdim", B(true)}})),
              {"reduce_sum", "output is 2xf32, expected 2x1xf32"});
  expectError(sig("reduce_sum", {D(f32, {2, 3})}, D(f32, {2})), {"reduce_sum", "'dims'"});
  expectError(sig("reduce_mean", {D(i64, {2, 3})}, D(i64, {2}), attrs({{"dims", L({1})}})),
              {"reduce_mean", "i64"});
  expectError(sig("reduce_max", {D(f32, {2, 0})}, D(f32, {2}), attrs({{"dims", L({1})}})),
              {"reduce_max", "zero elements"});
  expectError(sig("reduce_max", {D(i1, {2, 3})}, D(i1, {2}), attrs({{"dims", L({1})}})),
              {"reduce_max", "i1"});
  expectError(sig("reduce_sum", {D(f32, {2, 3})}, D(f32, {2}),
                  attrs({{"dims", L({1})}, {"keepdim", I(1)}})),
              {"reduce_sum", "'keepdim' must be a boolean"});
}

TEST_P(KernelTest, ProductReductions) {
  struct Case { Shape shape; Ints dims; Shape out; };
  std::vector<Case> cases = {{{3, 4, 5}, {1}, {3, 5}},   {{3, 4, 5}, {2}, {3, 4}},
                             {{3, 4, 5}, {0, 2}, {4}},   {{3, 4, 5}, {0, 1, 2}, {}},
                             {{6, 7}, {0}, {7}},         {{2, 0, 3}, {1}, {2, 3}}};
  for (const Case &c : cases) {
    Attributes a = attrs({{"dims", L(c.dims)}});
    for (DType dt : {f32, i64, i32}) {
      HostTensor x = dt == f32 ? random(c.shape, 0.5, 1.5) : randomInts(dt, c.shape, -3, 3);
      std::vector<double> want(numElements(c.out), 1);
      for (int64_t i = 0; i < x.numel(); ++i) {
        std::vector<int64_t> idx = unravel(i, c.shape), o;
        for (size_t d = 0; d < c.shape.size(); ++d)
          if (std::find(c.dims.begin(), c.dims.end(), int64_t(d)) == c.dims.end())
            o.push_back(idx[d]);
        want[ravel(o, c.out)] *= x.at(i);
      }
      HostTensor y;
      ASSERT_OK(run("reduce_prod", {&x}, D(dt, c.out), &y, a));
      std::string what = "reduce_prod " + describe(c.shape, dt);
      if (dt == f32)
        expectClose(y, want, 1e-6, 1e-5, what);
      else
        expectEqual(y, want, what); // an empty product is 1
    }
  }
  // Zeros and NaN reach the product; integers wrap as int64 (no float detour).
  HostTensor x = make(f32, {2, 3}, {2, 0, 3, 4, kNaN, 1}), y;
  ASSERT_OK(run("reduce_prod", {&x}, D(f32, {2}), &y, attrs({{"dims", L({1})}})));
  expectEqual(y, {0, kNaN});
  HostTensor big = make(i64, {2}, {3037000500.0, 3037000500.0});
  ASSERT_OK(run("reduce_prod", {&big}, D(i64, {}), &y, attrs({{"dims", L({0})}})));
  EXPECT_EQ(y.as<int64_t>()[0], static_cast<int64_t>(static_cast<uint64_t>(3037000500LL) *
                                                     static_cast<uint64_t>(3037000500LL)));
}

/// The first index of the extremum along `dim` of [outer, size, inner],
/// NaN counting as the extremum (its first occurrence), as PyTorch.
void refIndexReduction(const HostTensor &x, int64_t outer, int64_t size, int64_t inner, bool max,
                       std::vector<double> *values, std::vector<double> *indices) {
  values->assign(outer * inner, 0);
  indices->assign(outer * inner, 0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double best = x.at(o * size * inner + j);
      int64_t at = 0;
      for (int64_t i = 1; i < size && !std::isnan(best); ++i) {
        double v = x.at((o * size + i) * inner + j);
        if (std::isnan(v) || (max ? v > best : v < best)) {
          best = v;
          at = i;
        }
      }
      (*values)[o * inner + j] = best;
      (*indices)[o * inner + j] = static_cast<double>(at);
    }
}

TEST_P(KernelTest, IndexReductionsTakeTheFirstIndex) {
  struct Case { Shape shape; int64_t dim; };
  std::vector<Case> cases = {{{4, 6}, 1}, {{4, 6}, 0}, {{3, 4, 5}, 1}, {{3, 4, 5}, 2},
                             {{3, 4, 5}, 0}, {{1, 9}, 1}, {{5, 1}, 1}, {{300, 70}, 0}};
  for (const Case &c : cases)
    for (bool keepdim : {false, true})
      for (DType dt : {f32, i64, i32, i1}) {
        // Few distinct values, so ties are common.
        HostTensor x = dt == f32  ? randomInts(f32, c.shape, -3, 3)
                       : dt == i1 ? randomBools(c.shape)
                                  : randomInts(dt, c.shape, -3, 3);
        Shape out = c.shape;
        if (keepdim)
          out[c.dim] = 1;
        else
          out.erase(out.begin() + c.dim);
        const int64_t outer = numElements(Shape(c.shape.begin(), c.shape.begin() + c.dim));
        const int64_t inner = numElements(Shape(c.shape.begin() + c.dim + 1, c.shape.end()));
        for (bool max : {true, false}) {
          std::string kernel = max ? "reduce_max_index" : "reduce_min_index";
          KernelSignature s = sig(kernel, {x.desc}, D(dt, out),
                                  attrs({{"dim", I(c.dim)}, {"keepdim", B(keepdim)}}));
          s.outputs.push_back(D(i64, out));
          std::vector<HostTensor> ys;
          ASSERT_OK(runAll(s, {&x}, &ys));
          std::vector<double> values, indices;
          refIndexReduction(x, outer, c.shape[c.dim], inner, max, &values, &indices);
          std::string what = kernel + " " + describe(c.shape, dt) + " dim " +
                             std::to_string(c.dim) + (keepdim ? " keepdim" : "");
          expectEqual(ys[0], values, what);
          expectEqual(ys[1], indices, what + " indices");
        }
      }
}

TEST_P(KernelTest, IndexReductionsNaNAndInfinities) {
  auto both = [&](const std::string &kernel, const HostTensor &x, int64_t dim, Shape out,
                  std::vector<double> values, std::vector<double> indices) {
    KernelSignature s = sig(kernel, {x.desc}, D(x.desc.dtype, out), attrs({{"dim", I(dim)}}));
    s.outputs.push_back(D(i64, out));
    std::vector<HostTensor> ys;
    ASSERT_OK(runAll(s, {&x}, &ys));
    expectEqual(ys[0], values, kernel);
    expectEqual(ys[1], indices, kernel + " indices");
  };
  // Rows: ties take the first index; the first NaN wins for max and min.
  HostTensor rows = make(f32, {3, 4}, {1, 3, 3, 2, 5, kNaN, 7, kNaN, -kInf, -kInf, -kInf, -kInf});
  both("reduce_max_index", rows, 1, {3}, {3, kNaN, -kInf}, {1, 1, 0});
  both("reduce_min_index", rows, 1, {3}, {1, kNaN, -kInf}, {0, 1, 0});
  // Columns (the [size, inner] path): a NaN after a larger value still wins.
  HostTensor cols = make(f32, {3, 2}, {2, 9, 2, kNaN, 0, kNaN});
  both("reduce_max_index", cols, 0, {2}, {2, kNaN}, {0, 1});
  both("reduce_min_index", cols, 0, {2}, {0, kNaN}, {2, 1});
  HostTensor flags = make(i1, {4}, {0, 1, 1, 0});
  both("reduce_max_index", flags, 0, {}, {1}, {1});
  both("reduce_min_index", flags, 0, {}, {0}, {0});
  HostTensor extremes = make(i64, {3}, {-9223372036854775807.0 - 1, 5, 9223372036854775807.0});
  both("reduce_min_index", extremes, 0, {}, {-9223372036854775807.0 - 1}, {0});
}

TEST_P(KernelTest, IndexReductionValidation) {
  auto twoOutputs = [](KernelSignature s, TensorDesc indices) {
    s.outputs.push_back(std::move(indices));
    return s;
  };
  expectError(twoOutputs(sig("reduce_max_index", {D(f32, {2, 0})}, D(f32, {2}),
                             attrs({{"dim", I(1)}})),
                         D(i64, {2})),
              {"reduce_max_index", "empty dim 1"});
  expectError(twoOutputs(sig("reduce_min_index", {D(f32, {2, 3})}, D(f32, {2}),
                             attrs({{"dim", I(2)}})),
                         D(i64, {2})),
              {"reduce_min_index", "dim 2 is out of range for rank 2"});
  expectError(twoOutputs(sig("reduce_max_index", {D(f32, {2, 3})}, D(f32, {2}),
                             attrs({{"dim", I(1)}})),
                         D(i32, {2})),
              {"reduce_max_index", "indices output is 2xi32, expected 2xi64"});
  expectError(twoOutputs(sig("reduce_max_index", {D(f32, {2, 3})}, D(f32, {2}),
                             attrs({{"dim", I(1)}, {"keepdim", B(true)}})),
                         D(i64, {2, 1})),
              {"reduce_max_index", "output is 2xf32, expected 2x1xf32"});
  // One output is not enough.
  expectError(sig("reduce_max_index", {D(f32, {2, 3})}, D(f32, {2}), attrs({{"dim", I(1)}})),
              {"reduce_max_index"});
  expectError(twoOutputs(sig("reduce_max_index", {D(f16, {2, 3})}, D(f16, {2}),
                             attrs({{"dim", I(1)}})),
                         D(i64, {2})),
              {"reduce_max_index", "f16"});
}

TEST_P(KernelTest, ScansAlongAnyDim) {
  struct Case { Shape shape; int64_t dim; };
  std::vector<Case> cases = {{{4, 6}, 1}, {{4, 6}, 0}, {{3, 4, 5}, 1}, {{3, 4, 5}, 2},
                             {{3, 4, 5}, 0}, {{7}, 0}, {{2, 0, 3}, 1}, {{3, 1, 2}, 1}};
  for (const Case &c : cases)
    for (bool reverse : {false, true})
      for (DType dt : {f32, i64, i32}) {
        HostTensor x = dt == f32 ? random(c.shape, 0.5, 1.5) : randomInts(dt, c.shape, -3, 3);
        const int64_t size = c.shape[c.dim];
        const int64_t outer = numElements(Shape(c.shape.begin(), c.shape.begin() + c.dim));
        const int64_t inner = numElements(Shape(c.shape.begin() + c.dim + 1, c.shape.end()));
        std::vector<double> sum(x.numel()), prod(x.numel());
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < inner; ++j) {
            double s = 0, p = 1;
            for (int64_t k = 0; k < size; ++k) {
              int64_t i = reverse ? size - 1 - k : k;
              int64_t at = (o * size + i) * inner + j;
              s += x.at(at);
              p *= x.at(at);
              sum[at] = s;
              prod[at] = p;
            }
          }
        Attributes a = attrs({{"dim", I(c.dim)}, {"reverse", B(reverse)}});
        std::string what = describe(c.shape, dt) + " dim " + std::to_string(c.dim) +
                           (reverse ? " reverse" : "");
        HostTensor y;
        ASSERT_OK(run("cumsum", {&x}, x.desc, &y, a));
        expectClose(y, sum, dt == f32 ? 1e-5 : 0, dt == f32 ? 1e-6 : 0, "cumsum " + what);
        ASSERT_OK(run("cumprod", {&x}, x.desc, &y, a));
        expectClose(y, prod, dt == f32 ? 1e-6 : 0, dt == f32 ? 1e-6 : 0, "cumprod " + what);
      }
  // NaN and infinities carry on along the scan; a zero stays in the product.
  HostTensor x = make(f32, {5}, {1, kNaN, 2, kInf, 3}), y;
  ASSERT_OK(run("cumsum", {&x}, x.desc, &y, attrs({{"dim", I(0)}})));
  expectEqual(y, {1, kNaN, kNaN, kNaN, kNaN});
  ASSERT_OK(run("cumsum", {&x}, x.desc, &y, attrs({{"dim", I(0)}, {"reverse", B(true)}})));
  expectEqual(y, {kNaN, kNaN, kInf, kInf, 3});
  HostTensor z = make(f32, {4}, {2, 0, kInf, 3});
  ASSERT_OK(run("cumprod", {&z}, z.desc, &y, attrs({{"dim", I(0)}})));
  expectEqual(y, {2, 0, kNaN, kNaN}); // 0 * inf, as PyTorch
  // Floats accumulate in double, as PyTorch's CPU cumsum: adding quarter
  // ulps of 1 one at a time reaches 1 + ulp, where an f32 sum stays at 1.
  HostTensor fine = make(f32, {5}, {1, 0x1p-25, 0x1p-25, 0x1p-25, 0x1p-25});
  ASSERT_OK(run("cumsum", {&fine}, fine.desc, &y, attrs({{"dim", I(0)}})));
  const double up = 1.0 + 0x1p-23;
  expectEqual(y, {1, 1, 1, up, up});
}

/// Runs a kernel with values and i64 indices of the input's shape.
static KernelSignature withIndices(KernelSignature s) {
  s.outputs.push_back(TensorDesc{DType::I64, s.outputs[0].shape});
  return s;
}

TEST_P(KernelTest, SortIsStableWithNaNLast) {
  auto check = [&](const HostTensor &x, int64_t dim, bool descending,
                   std::vector<double> values, std::vector<double> indices) {
    std::vector<HostTensor> ys;
    ASSERT_OK(runAll(withIndices(sig("sort", {x.desc}, x.desc,
                                     attrs({{"dim", I(dim)}, {"descending", B(descending)}}))),
                     {&x}, &ys));
    std::string what = std::string("sort") + (descending ? " descending" : "");
    expectEqual(ys[0], values, what);
    expectEqual(ys[1], indices, what + " indices");
  };
  // torch.sort(x) and torch.sort(x, descending=True) of torch 1.13 on the CPU:
  // ties keep their order both ways, NaN is the largest.
  HostTensor x = make(f32, {7}, {1, 3, 1, kNaN, 3, 1, kNaN});
  check(x, 0, false, {1, 1, 1, 3, 3, kNaN, kNaN}, {0, 2, 5, 1, 4, 3, 6});
  check(x, 0, true, {kNaN, kNaN, 3, 3, 1, 1, 1}, {3, 6, 1, 4, 0, 2, 5});
  HostTensor inf = make(f32, {4}, {kInf, -kInf, 0, kNaN});
  check(inf, 0, false, {-kInf, 0, kInf, kNaN}, {1, 2, 0, 3});
  // Columns (dim 0 of [3, 2]) and bools.
  HostTensor cols = make(i64, {3, 2}, {5, 1, 2, 1, 5, 0});
  check(cols, 0, false, {2, 0, 5, 1, 5, 1}, {1, 2, 0, 0, 2, 1});
  check(cols, 0, true, {5, 1, 5, 1, 2, 0}, {0, 0, 2, 1, 1, 2});
  HostTensor flags = make(i1, {4}, {1, 0, 1, 0});
  check(flags, 0, true, {1, 1, 0, 0}, {0, 2, 1, 3});
  check(flags, 0, false, {0, 0, 1, 1}, {1, 3, 0, 2});
}

TEST_P(KernelTest, SortsAnyDimOfAnyDType) {
  struct Case { Shape shape; int64_t dim; };
  std::vector<Case> cases = {{{4, 9}, 1}, {{4, 9}, 0}, {{3, 4, 5}, 1}, {{3, 4, 5}, 2},
                             {{2, 0, 3}, 1}, {{3, 1, 2}, 1}, {{1000}, 0}};
  for (const Case &c : cases)
    for (bool descending : {false, true})
      for (DType dt : {f32, i64, i32, i1}) {
        // Few distinct values, so ties are common.
        HostTensor x = dt == i1 ? randomBools(c.shape) : randomInts(dt, c.shape, -4, 4);
        std::vector<HostTensor> ys;
        ASSERT_OK(runAll(withIndices(sig("sort", {x.desc}, x.desc,
                                         attrs({{"dim", I(c.dim)}, {"descending", B(descending)}}))),
                         {&x}, &ys));
        std::string what = "sort " + describe(c.shape, dt) + " dim " + std::to_string(c.dim) +
                           (descending ? " descending" : "");
        // Each slice: a permutation of the input, ordered, ties by index.
        const int64_t size = c.shape[c.dim];
        const int64_t outer = numElements(Shape(c.shape.begin(), c.shape.begin() + c.dim));
        const int64_t inner = numElements(Shape(c.shape.begin() + c.dim + 1, c.shape.end()));
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < inner; ++j) {
            std::vector<bool> seen(size, false);
            for (int64_t k = 0; k < size; ++k) {
              const int64_t at = (o * size + k) * inner + j;
              const int64_t from = static_cast<int64_t>(ys[1].at(at));
              ASSERT_TRUE(from >= 0 && from < size && !seen[from]) << what;
              seen[from] = true;
              EXPECT_EQ(ys[0].at(at), x.at((o * size + from) * inner + j)) << what;
              if (k == 0)
                continue;
              const int64_t prev = at - inner;
              const double a = ys[0].at(prev), b = ys[0].at(at);
              EXPECT_TRUE(descending ? a >= b : a <= b) << what << " at " << at;
              if (a == b)
                EXPECT_LT(ys[1].at(prev), ys[1].at(at)) << what << " (stability) at " << at;
            }
          }
      }
}

TEST_P(KernelTest, RunningExtremaTakeTheLastTieAndKeepNaN) {
  auto check = [&](const std::string &kernel, const HostTensor &x, int64_t dim,
                   std::vector<double> values, std::vector<double> indices) {
    std::vector<HostTensor> ys;
    ASSERT_OK(runAll(withIndices(sig(kernel, {x.desc}, x.desc, attrs({{"dim", I(dim)}}))), {&x},
                     &ys));
    expectEqual(ys[0], values, kernel);
    expectEqual(ys[1], indices, kernel + " indices");
  };
  // torch.cummax / torch.cummin of torch 1.13 on the CPU.
  HostTensor x = make(f32, {7}, {1, 3, 1, kNaN, 3, 1, kNaN});
  check("cummax", x, 0, {1, 3, 3, kNaN, kNaN, kNaN, kNaN}, {0, 1, 1, 3, 3, 3, 6});
  check("cummin", x, 0, {1, 1, 1, kNaN, kNaN, kNaN, kNaN}, {0, 0, 2, 3, 3, 3, 6});
  check("cummax", make(i64, {5}, {1, 3, 3, 2, 3}), 0, {1, 3, 3, 3, 3}, {0, 1, 2, 2, 4});
  check("cummin", make(i32, {5}, {1, 0, 0, 2, 0}), 0, {1, 0, 0, 0, 0}, {0, 1, 2, 2, 4});
  check("cummax", make(i1, {3}, {1, 0, 1}), 0, {1, 1, 1}, {0, 0, 2});
  // Columns: dim 0 of [3, 2].
  check("cummax", make(f32, {3, 2}, {1, 4, 2, 4, 0, 5}), 0, {1, 4, 2, 4, 2, 5},
        {0, 0, 1, 1, 1, 2});
  expectError(sig("cummax", {D(f32, {2, 3})}, D(f32, {2, 3}), attrs({{"dim", I(1)}})),
              {"cummax"});
}

TEST_P(KernelTest, LogcumsumexpStaysExactHundredsApart) {
  auto run1 = [&](const HostTensor &x, bool reverse) {
    HostTensor y;
    Status status =
        run("logcumsumexp", {&x}, x.desc, &y, attrs({{"dim", I(0)}, {"reverse", B(reverse)}}));
    EXPECT_TRUE(status.ok()) << status.message();
    return y;
  };
  // A shift by the global maximum would give -inf for the first two.
  HostTensor far = make(f32, {4}, {-1000, -900, 1000, -kInf});
  expectClose(run1(far, false), {-1000, -900 + std::log1p(std::exp(-100.0)), 1000, 1000}, 1e-3,
              1e-6, "logcumsumexp far apart");
  expectClose(run1(far, true), {1000, 1000, 1000, -kInf}, 1e-3, 1e-6, "reverse");
  // -inf adds nothing, equal infinities stay, NaN propagates.
  expectEqual(run1(make(f32, {3}, {-kInf, -kInf, 1}), false), {-kInf, -kInf, 1});
  expectEqual(run1(make(f32, {3}, {kInf, kInf, 0}), false), {kInf, kInf, kInf});
  expectEqual(run1(make(f32, {3}, {0, kNaN, 1}), false), {0, kNaN, kNaN});
  // Against log(sum(exp)) in double, along a middle dim.
  HostTensor x = random({3, 5, 4}, -3, 3), y;
  ASSERT_OK(run("logcumsumexp", {&x}, x.desc, &y, attrs({{"dim", I(1)}})));
  std::vector<double> want(x.numel());
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t j = 0; j < 4; ++j) {
      double s = 0;
      for (int64_t k = 0; k < 5; ++k) {
        const int64_t at = (o * 5 + k) * 4 + j;
        s += std::exp(x.at(at));
        want[at] = std::log(s);
      }
    }
  expectClose(y, want, 1e-5, 1e-5, "logcumsumexp dim 1");
  expectError(sig("logcumsumexp", {D(i64, {3})}, D(i64, {3}), attrs({{"dim", I(0)}})),
              {"logcumsumexp", "i64"});
}

TEST_P(KernelTest, ScanValidation) {
  expectError(sig("cumsum", {D(f32, {2, 3})}, D(f32, {2, 3}), attrs({{"dim", I(2)}})),
              {"cumsum", "dim 2 is out of range for rank 2"});
  expectError(sig("cumprod", {D(f32, {2, 3})}, D(f32, {3, 2}), attrs({{"dim", I(0)}})),
              {"cumprod", "output is 3x2xf32, expected 2x3xf32"});
  expectError(sig("cumsum", {D(i1, {2, 3})}, D(i1, {2, 3}), attrs({{"dim", I(0)}})),
              {"cumsum", "i1"});
  expectError(sig("cumsum", {D(f32, {2, 3})}, D(f32, {2, 3})), {"cumsum", "'dim'"});
  expectError(sig("reduce_prod", {D(i1, {2, 3})}, D(i1, {2}), attrs({{"dims", L({1})}})),
              {"reduce_prod", "i1"});
}

//===----------------------------------------------------------------------===//
// Convolution and pooling.
//===----------------------------------------------------------------------===//

struct ConvCase {
  Shape x, w;
  Ints stride, padding, dilation;
  int64_t groups;
  bool bias;
};

int64_t convOut(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

TEST_P(KernelTest, Conv2dMatchesDirectConvolution) {
  std::vector<ConvCase> cases = {
      {{2, 4, 9, 11}, {6, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
      {{1, 3, 16, 15}, {5, 3, 7, 7}, {2, 2}, {3, 3}, {1, 1}, 1, false},
      {{2, 4, 10, 10}, {6, 2, 3, 3}, {1, 2}, {0, 1}, {1, 1}, 2, true},  // groups
      {{1, 2, 12, 13}, {3, 2, 3, 2}, {1, 1}, {2, 1}, {2, 3}, 1, true},  // dilation
      {{2, 8, 7, 6}, {5, 8, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},    // direct GEMM
      {{2, 8, 7, 6}, {4, 8, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, false},   // strided 1x1
      {{1, 6, 8, 8}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6, true},    // depthwise
      {{2, 4, 5, 5}, {4, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 2, true},    // grouped direct
      {{1, 2, 4, 4}, {3, 2, 3, 3}, {3, 3}, {2, 2}, {1, 1}, 1, true},    // padding > stride
      {{1, 1, 3, 3}, {2, 1, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, false},   // 1x1 output
      // Depthwise (the direct kernel): 7x7 as ConvNeXt, stride 2 as MobileNet,
      // a channel multiplier, dilation, uneven strides, 5x5 and a generic width,
      // padding wider than the kernel reaches, more planes than threads.
      {{2, 16, 20, 19}, {16, 1, 7, 7}, {1, 1}, {3, 3}, {1, 1}, 16, true},
      {{1, 8, 15, 16}, {8, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 8, false},
      {{2, 3, 9, 10}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3, true},   // multiplier 2
      {{1, 4, 13, 12}, {4, 1, 3, 3}, {1, 2}, {2, 2}, {2, 2}, 4, true},  // dilation
      {{1, 5, 11, 11}, {5, 1, 5, 5}, {2, 1}, {2, 2}, {1, 1}, 5, true},
      {{1, 3, 8, 9}, {3, 1, 2, 4}, {1, 3}, {0, 1}, {1, 1}, 3, false},
      {{1, 2, 3, 4}, {2, 1, 3, 3}, {1, 1}, {4, 4}, {1, 1}, 2, true},
      {{1, 64, 6, 6}, {64, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 64, true},
      // Column strides split padded rows into phases: 3 phases, a long
      // stride-2 row, padding beyond the kernel's reach at stride 2.
      {{1, 3, 20, 70}, {3, 1, 3, 3}, {1, 3}, {1, 2}, {1, 1}, 3, true},
      {{2, 4, 9, 66}, {4, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, 4, false},
      {{1, 2, 3, 4}, {2, 1, 3, 3}, {2, 2}, {4, 4}, {1, 1}, 2, true},
      // Small grouped GEMMs as parallel tasks (RegNet, ResNeXt).
      {{2, 32, 9, 9}, {32, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 8, true},
      {{1, 48, 8, 8}, {48, 8, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 6, false},
      // oneDNN's primitive with an owned weight (conv2dUsesPrimitive): filters
      // a multiple of its 64-blocks (other counts pad the prepacked weight,
      // and fall back to im2col), more images than one call takes (4 + 2),
      // strides, dilation, no bias, a 3-channel stem, and a grouped
      // convolution with large groups.
      {{2, 5, 17, 16}, {7, 5, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
      {{6, 16, 9, 10}, {64, 16, 3, 3}, {1, 1}, {0, 1}, {1, 1}, 1, false},
      {{1, 16, 20, 19}, {64, 16, 5, 3}, {2, 1}, {2, 1}, {1, 2}, 1, true},
      {{2, 3, 23, 22}, {64, 3, 7, 7}, {2, 2}, {3, 3}, {1, 1}, 1, false},
      {{1, 128, 12, 12}, {128, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, true},
      // Groups of 48 channels (RegNet-X 3.2GF's), and of 40, which pad the
      // prepacked weight and fall back to im2col.
      {{1, 96, 12, 12}, {96, 48, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, true},
      {{1, 80, 14, 14}, {80, 40, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, false},
  };
  for (const ConvCase &c : cases) {
    const int64_t n = c.x[0], cin = c.x[1], h = c.x[2], wd = c.x[3];
    const int64_t f = c.w[0], cg = c.w[1], kh = c.w[2], kw = c.w[3];
    const int64_t oh = convOut(h, kh, c.stride[0], c.padding[0], c.dilation[0]);
    const int64_t ow = convOut(wd, kw, c.stride[1], c.padding[1], c.dilation[1]);
    Shape out = {n, f, oh, ow};
    HostTensor x = random(c.x), w = random(c.w), b = random({f});
    size_t scratch = conv2dScratchBytes(c.x, c.w, out, c.groups, c.stride, c.padding, c.dilation, f32);
    Attributes a = attrs({{"stride", L(c.stride)}, {"padding", L(c.padding)},
                          {"dilation", L(c.dilation)}, {"groups", I(c.groups)}});
    HostTensor y, owned;
    std::vector<const HostTensor *> inputs = {&x, &w};
    if (c.bias)
      inputs.push_back(&b);
    ASSERT_OK(run("conv2d", inputs, D(f32, out), &y, a, scratch));
    // A forward-only program's weight (oneDNN's primitive where the shape
    // takes it, the weight prepacked in place by the first of two calls).
    std::vector<std::optional<TensorDesc>> descs;
    for (const HostTensor *in : inputs)
      descs.push_back(in->desc);
    KernelSignature ownedSig = sig("conv2d", descs, D(f32, out), a, scratch);
    ownedSig.ownedConstants = {false, true, false};
    ASSERT_OK(run(ownedSig, inputs, &owned, /*calls=*/2));
    std::vector<double> want(numElements(out));
    const int64_t fg = f / c.groups;
    for (int64_t in = 0; in < n; ++in)
      for (int64_t of = 0; of < f; ++of)
        for (int64_t oy = 0; oy < oh; ++oy)
          for (int64_t ox = 0; ox < ow; ++ox) {
            double s = c.bias ? b.at(of) : 0;
            int64_t g = of / fg;
            for (int64_t ic = 0; ic < cg; ++ic)
              for (int64_t ky = 0; ky < kh; ++ky)
                for (int64_t kx = 0; kx < kw; ++kx) {
                  int64_t iy = oy * c.stride[0] - c.padding[0] + ky * c.dilation[0];
                  int64_t ix = ox * c.stride[1] - c.padding[1] + kx * c.dilation[1];
                  if (iy < 0 || iy >= h || ix < 0 || ix >= wd)
                    continue;
                  s += x.at(((in * cin + g * cg + ic) * h + iy) * wd + ix) *
                       w.at(((of * cg + ic) * kh + ky) * kw + kx);
                }
            want[((in * f + of) * oh + oy) * ow + ox] = s;
          }
    expectClose(y, want, 1e-4, 1e-4, "conv2d " + describe(c.x, f32) + " * " + describe(c.w, f32));
    expectClose(owned, want, 1e-4, 1e-4,
                "conv2d, owned weight, " + describe(c.x, f32) + " * " + describe(c.w, f32));

    // fused_conv2d on the same path: + residual, clamped to [0, 1.5] (the
    // bounds every backend takes), with the weight borrowed and owned.
    HostTensor r = random(out);
    Attributes fa = a;
    fa.set("min", 0.0);
    fa.set("max", 1.5);
    std::vector<const HostTensor *> fusedInputs = {&x, &w, c.bias ? &b : nullptr, &r};
    std::vector<std::optional<TensorDesc>> fusedDescs;
    for (const HostTensor *in : fusedInputs)
      fusedDescs.push_back(in ? std::optional<TensorDesc>(in->desc) : std::nullopt);
    KernelSignature fusedSig = sig("fused_conv2d", fusedDescs, D(f32, out), fa, scratch);
    HostTensor fused, fusedOwned;
    ASSERT_OK(run(fusedSig, fusedInputs, &fused));
    fusedSig.ownedConstants = {false, true, false, false};
    ASSERT_OK(run(fusedSig, fusedInputs, &fusedOwned, /*calls=*/2));
    std::vector<double> clamped(want.size());
    for (size_t i = 0; i < want.size(); ++i)
      clamped[i] = std::min(1.5, std::max(0.0, want[i] + r.at(static_cast<int64_t>(i))));
    expectClose(fused, clamped, 1e-4, 1e-4,
                "fused_conv2d " + describe(c.x, f32) + " * " + describe(c.w, f32));
    expectClose(fusedOwned, clamped, 1e-4, 1e-4,
                "fused_conv2d, owned weight, " + describe(c.x, f32) + " * " + describe(c.w, f32));
  }
}

TEST_P(KernelTest, FusedConv2dNamesItsBadEpilogue) {
  const Shape x = {1, 4, 6, 6}, w = {4, 4, 1, 1}, out = {1, 4, 6, 6};
  Attributes a = attrs({{"stride", L({1, 1})}, {"padding", L({0, 0})},
                        {"dilation", L({1, 1})}, {"groups", I(1)}});
  expectError(sig("fused_conv2d", {D(f32, x), D(f32, w), std::nullopt, D(f32, {1, 4, 6, 1})},
                  D(f32, out), a),
              {"fused_conv2d", "residual", "1x4x6x1xf32"});
  Attributes inverted = a;
  inverted.set("min", 2.0);
  inverted.set("max", 1.0);
  expectError(sig("fused_conv2d", {D(f32, x), D(f32, w)}, D(f32, out), inverted),
              {"fused_conv2d", "clamp bounds"});
}

TEST_P(KernelTest, ConvScratchFormula) {
  // (C_in / groups) * KH * KW * OH * OW floats, 0 for the direct GEMM.
  EXPECT_EQ(conv2dIm2colScratchBytes({1, 3, 32, 32}, {64, 3, 7, 7}, {1, 64, 16, 16}, 1, {2, 2},
                                     {3, 3}, {1, 1}, f32),
            size_t(3 * 7 * 7 * 16 * 16 * 4));
  // Where the primitive can run, at least its copies of the input and the
  // output and the weight in a blocked format (filters and channels of a
  // group rounded up to 16): here more than the im2col matrix.
  EXPECT_EQ(conv2dScratchBytes({1, 3, 32, 32}, {64, 3, 7, 7}, {1, 64, 16, 16}, 1, {2, 2}, {3, 3},
                               {1, 1}, f32),
            size_t((3 * 32 * 32 + 64 * 16 * 16 + 64 * 16 * 7 * 7) * 4));
  EXPECT_EQ(conv2dScratchBytes({2, 8, 7, 6}, {5, 8, 1, 1}, {2, 5, 7, 6}, 1, {1, 1}, {0, 0}, {1, 1}, f32),
            0u);
  EXPECT_EQ(conv2dScratchBytes({2, 8, 7, 6}, {4, 8, 1, 1}, {2, 4, 4, 3}, 1, {2, 2}, {0, 0}, {1, 1}, f32),
            size_t(8 * 4 * 3 * 4));
  EXPECT_EQ(conv2dScratchBytes({1, 6, 8, 8}, {6, 2, 3, 3}, {1, 6, 8, 8}, 3, {1, 1}, {1, 1}, {1, 1}, f32),
            size_t(2 * 9 * 64 * 4));
  // Where the primitive can run: the larger of the im2col matrix and its
  // copies of 4 images' input and output with the blocked weight; the
  // gradients' kernels reserve the same.
  EXPECT_TRUE(conv2dUsesPrimitive({4, 16, 32, 32}, {256, 16, 3, 3}, {4, 256, 32, 32}, 1));
  const size_t copies = (4 * 16 * 1024 + 4 * 256 * 1024 + 256 * 16 * 9) * 4;
  EXPECT_EQ(conv2dScratchBytes({4, 16, 32, 32}, {256, 16, 3, 3}, {4, 256, 32, 32}, 1, {1, 1},
                               {1, 1}, {1, 1}, f32),
            copies);
  EXPECT_EQ(conv2dScratchBytes({6, 16, 32, 32}, {256, 16, 3, 3}, {6, 256, 32, 32}, 1, {1, 1},
                               {1, 1}, {1, 1}, f32),
            copies);
  EXPECT_EQ(conv2dBackwardInputScratchBytes({6, 16, 32, 32}, {256, 16, 3, 3}, {6, 256, 32, 32},
                                            1, {1, 1}, {1, 1}, {1, 1}, f32),
            copies);
  EXPECT_EQ(conv2dBackwardWeightScratchBytes({6, 16, 32, 32}, {256, 16, 3, 3}, {6, 256, 32, 32},
                                             1, {1, 1}, {1, 1}, {1, 1}, f32),
            copies);
  EXPECT_TRUE(conv2dUsesPrimitive({8, 64, 56, 56}, {64, 64, 3, 3}, {8, 64, 56, 56}, 1));
  EXPECT_EQ(conv2dScratchBytes({8, 64, 56, 56}, {64, 64, 3, 3}, {8, 64, 56, 56}, 1, {1, 1},
                               {1, 1}, {1, 1}, f32),
            size_t(64 * 9 * 56 * 56 * 4));
  EXPECT_TRUE(conv2dUsesPrimitive({2, 512, 7, 7}, {512, 512, 3, 3}, {2, 512, 7, 7}, 1));
  EXPECT_TRUE(conv2dUsesPrimitive({2, 896, 14, 14}, {896, 128, 3, 3}, {2, 896, 14, 14}, 7));
  EXPECT_TRUE(conv2dUsesPrimitive({2, 432, 14, 14}, {432, 48, 3, 3}, {2, 432, 14, 14}, 9));
  // Not the primitive: 1x1, depthwise, small groups (run as parallel
  // tasks), narrow groups.
  EXPECT_FALSE(conv2dUsesPrimitive({8, 64, 56, 56}, {64, 64, 1, 1}, {8, 64, 56, 56}, 1));
  EXPECT_FALSE(conv2dUsesPrimitive({8, 64, 56, 56}, {64, 1, 3, 3}, {8, 64, 56, 56}, 64));
  EXPECT_FALSE(conv2dUsesPrimitive({2, 1024, 14, 14}, {1024, 32, 3, 3}, {2, 1024, 14, 14}, 32));
  EXPECT_FALSE(conv2dUsesPrimitive({2, 168, 56, 56}, {168, 24, 3, 3}, {2, 168, 56, 56}, 7));
}

TEST_P(KernelTest, Conv2dValidation) {
  Attributes a = attrs({{"stride", L({1, 1})}, {"padding", L({0, 0})}, {"dilation", L({1, 1})},
                        {"groups", I(1)}});
  size_t scratch = 1 << 20;
  expectError(sig("conv2d", {D(f32, {1, 4, 32, 32}), D(f32, {64, 3, 7, 7})}, D(f32, {1, 64, 26, 26}),
                  a, scratch),
              {"conv2d: weight 64x3x7x7xf32 needs 3 input channels per group, input 1x4x32x32xf32 has 4"});
  expectError(sig("conv2d", {D(f32, {1, 6, 8, 8}), D(f32, {4, 3, 3, 3})}, D(f32, {1, 4, 6, 6}),
                  attrs({{"stride", L({1, 1})}, {"padding", L({0, 0})}, {"dilation", L({1, 1})},
                         {"groups", I(4)}}),
                  scratch),
              {"conv2d", "6 channels", "groups = 4"});
  expectError(sig("conv2d", {D(f32, {1, 4, 8, 8}), D(f32, {3, 2, 3, 3})}, D(f32, {1, 3, 6, 6}),
                  attrs({{"stride", L({1, 1})}, {"padding", L({0, 0})}, {"dilation", L({1, 1})},
                         {"groups", I(2)}}),
                  scratch),
              {"conv2d", "3 filters", "groups = 2"});
  // Too little scratch for the im2col matrix: 3 * 3 * 3 * 6 * 6 floats.
  expectError(sig("conv2d", {D(f32, {1, 3, 8, 8}), D(f32, {4, 3, 3, 3})}, D(f32, {1, 4, 6, 6}), a,
                  100),
              {"conv2d", "needs 10560 bytes of scratch", "reserves 100"});
  expectError(sig("conv2d", {D(f32, {1, 3, 8, 8}), D(f32, {4, 3, 3, 3})}, D(f32, {1, 4, 8, 8}), a,
                  scratch),
              {"conv2d", "output is 1x4x8x8xf32, expected 1x4x6x6xf32"});
  expectError(sig("conv2d", {D(f32, {1, 3, 8, 8}), D(f32, {4, 3, 3, 3}), D(f32, {3})},
                  D(f32, {1, 4, 6, 6}), a, scratch),
              {"conv2d", "bias 3xf32", "[4]"});
  expectError(sig("conv2d", {D(f32, {3, 8, 8}), D(f32, {4, 3, 3, 3})}, D(f32, {4, 6, 6}), a, scratch),
              {"conv2d", "4-D input"});
  expectError(sig("conv2d", {D(f32, {1, 3, 2, 2}), D(f32, {4, 3, 3, 3})}, D(f32, {1, 4, 1, 1}), a,
                  scratch),
              {"conv2d", "larger than the padded input"});
  expectError(sig("conv2d", {D(f32, {1, 3, 8, 8}), D(f32, {4, 3, 3, 3})}, D(f32, {1, 4, 6, 6}),
                  attrs({{"stride", L({1, 1})}, {"padding", L({0, 0})}, {"groups", I(1)}}), scratch),
              {"conv2d", "missing attribute 'dilation'"});
  expectError(sig("conv2d", {D(f32, {1, 3, 8, 8}), D(f32, {4, 3, 3, 3})}, D(f32, {1, 4, 6, 6}),
                  attrs({{"stride", L({0, 1})}, {"padding", L({0, 0})}, {"dilation", L({1, 1})},
                         {"groups", I(1)}}),
                  scratch),
              {"conv2d", "'stride' entries must be >= 1"});
  expectError(sig("conv2d", {D(f32, {1, 3, 8, 8}), D(f32, {4, 3, 3, 3})}, D(f32, {1, 4, 6, 6}),
                  attrs({{"stride", L({1})}, {"padding", L({0, 0})}, {"dilation", L({1, 1})},
                         {"groups", I(1)}}),
                  scratch),
              {"conv2d", "'stride' must have 2 entries"});
  expectError(sig("conv2d", {D(f32, {1, 3, 8, 8}), D(f32, {4, 3, 3, 3})}, D(f32, {1, 4, 6, 6}),
                  attrs({{"stride", L({1, 1})}, {"padding", L({0, 0})}, {"dilation", L({1, 1})},
                         {"groups", I(0)}}),
                  scratch),
              {"conv2d", "groups must be >= 1"});
  expectError(
      sig("conv2d", {D(f16, {1, 3, 8, 8}), D(f16, {4, 3, 3, 3})}, D(f16, {1, 4, 6, 6}), a, scratch),
      {"no f16 kernel for 'conv2d'"});
  // The direct-GEMM case needs no scratch at all.
  KernelFn fn;
  ASSERT_OK(prepare(sig("conv2d", {D(f32, {1, 3, 8, 8}), D(f32, {4, 3, 1, 1})}, D(f32, {1, 4, 8, 8}),
                        a, 0),
                    &fn));
}

int64_t poolOut(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + p)
    --out;
  return out;
}

struct PoolCase {
  Shape x;
  Ints kernel, stride, padding, dilation;
  bool ceil;
};

const std::vector<PoolCase> kPoolCases = {
    {{2, 3, 9, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
    {{1, 2, 10, 7}, {3, 2}, {2, 2}, {1, 1}, {1, 1}, true},   // ceil overhang
    {{1, 2, 5, 5}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true},    // last window dropped
    {{2, 2, 8, 8}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
    {{1, 3, 11, 12}, {3, 3}, {3, 2}, {1, 0}, {2, 1}, true},  // dilation (max only)
    {{1, 1, 6, 6}, {4, 4}, {3, 3}, {2, 2}, {1, 1}, true},
    {{8, 64, 20, 20}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false}, // threaded
    // Stride 1, as wide as the input (max pools these plane by plane).
    {{2, 3, 9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, true},
    {{1, 2, 7, 6}, {5, 5}, {1, 1}, {2, 2}, {1, 1}, false},
    {{1, 2, 6, 5}, {3, 5}, {1, 1}, {0, 2}, {1, 1}, false},     // fewer rows out
    {{1, 2, 2, 2}, {5, 5}, {1, 1}, {2, 2}, {1, 1}, false},     // every column an edge
    {{4, 32, 14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, true},   // threaded
};

TEST_P(KernelTest, MaxPool2dWithCeilModeAndDilation) {
  for (const PoolCase &c : kPoolCases) {
    const int64_t h = c.x[2], w = c.x[3], planes = c.x[0] * c.x[1];
    const int64_t oh = poolOut(h, c.kernel[0], c.stride[0], c.padding[0], c.dilation[0], c.ceil);
    const int64_t ow = poolOut(w, c.kernel[1], c.stride[1], c.padding[1], c.dilation[1], c.ceil);
    HostTensor x = random(c.x), y;
    Attributes a = attrs({{"kernel", L(c.kernel)}, {"stride", L(c.stride)},
                          {"padding", L(c.padding)}, {"dilation", L(c.dilation)},
                          {"ceil_mode", B(c.ceil)}});
    ASSERT_OK(run("max_pool2d", {&x}, D(f32, {c.x[0], c.x[1], oh, ow}), &y, a));
    std::vector<double> want;
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double m = -kInf;
          for (int64_t ky = 0; ky < c.kernel[0]; ++ky)
            for (int64_t kx = 0; kx < c.kernel[1]; ++kx) {
              int64_t iy = oy * c.stride[0] - c.padding[0] + ky * c.dilation[0];
              int64_t ix = ox * c.stride[1] - c.padding[1] + kx * c.dilation[1];
              if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                m = std::max(m, x.at((p * h + iy) * w + ix));
            }
          want.push_back(m);
        }
    expectEqual(y, want, "max_pool2d " + describe(c.x, f32) + (c.ceil ? " ceil" : ""));
  }
  // ceil_mode defaults to false; a NaN in a window propagates, as PyTorch.
  HostTensor x = random({1, 1, 5, 5}), y;
  x.as<float>()[6] = std::numeric_limits<float>::quiet_NaN(); // row 1, column 1
  ASSERT_OK(run("max_pool2d", {&x}, D(f32, {1, 1, 2, 2}), &y,
                attrs({{"kernel", L({2, 2})}, {"stride", L({2, 2})}, {"padding", L({0, 0})},
                       {"dilation", L({1, 1})}})));
  EXPECT_TRUE(std::isnan(y.at(0)));
  EXPECT_FALSE(std::isnan(y.at(1)));
  // The stride-1 "same" pools too, a NaN at the left edge and one inside:
  // exactly the windows that hold them are NaN.
  HostTensor s = random({1, 1, 6, 6}), z;
  s.as<float>()[2 * 6 + 0] = std::numeric_limits<float>::quiet_NaN(); // row 2, column 0
  s.as<float>()[4 * 6 + 3] = std::numeric_limits<float>::quiet_NaN(); // row 4, column 3
  ASSERT_OK(run("max_pool2d", {&s}, D(f32, {1, 1, 6, 6}), &z,
                attrs({{"kernel", L({3, 3})}, {"stride", L({1, 1})}, {"padding", L({1, 1})},
                       {"dilation", L({1, 1})}})));
  for (int64_t oy = 0; oy < 6; ++oy)
    for (int64_t ox = 0; ox < 6; ++ox) {
      bool holds = (std::abs(oy - 2) <= 1 && ox <= 1) ||
                   (std::abs(oy - 4) <= 1 && std::abs(ox - 3) <= 1);
      EXPECT_EQ(std::isnan(z.at(oy * 6 + ox)), holds) << "output " << oy << ", " << ox;
    }
}

TEST_P(KernelTest, AvgPool2dDivisorsAsPyTorch) {
  for (const PoolCase &c : kPoolCases) {
    for (bool includePad : {true, false}) {
      const int64_t h = c.x[2], w = c.x[3], planes = c.x[0] * c.x[1];
      const int64_t oh = poolOut(h, c.kernel[0], c.stride[0], c.padding[0], 1, c.ceil);
      const int64_t ow = poolOut(w, c.kernel[1], c.stride[1], c.padding[1], 1, c.ceil);
      HostTensor x = random(c.x), y;
      Attributes a = attrs({{"kernel", L(c.kernel)}, {"stride", L(c.stride)},
                            {"padding", L(c.padding)}, {"ceil_mode", B(c.ceil)},
                            {"count_include_pad", B(includePad)}});
      ASSERT_OK(run("avg_pool2d", {&x}, D(f32, {c.x[0], c.x[1], oh, ow}), &y, a));
      std::vector<double> want;
      for (int64_t p = 0; p < planes; ++p)
        for (int64_t oy = 0; oy < oh; ++oy)
          for (int64_t ox = 0; ox < ow; ++ox) {
            double sum = 0;
            int64_t inside = 0, padded = 0;
            for (int64_t ky = 0; ky < c.kernel[0]; ++ky)
              for (int64_t kx = 0; kx < c.kernel[1]; ++kx) {
                int64_t iy = oy * c.stride[0] - c.padding[0] + ky;
                int64_t ix = ox * c.stride[1] - c.padding[1] + kx;
                // Taps in the padded input count with count_include_pad;
                // taps beyond it (ceil_mode's overhang) never do.
                if (iy < h + c.padding[0] && ix < w + c.padding[1])
                  ++padded;
                if (iy >= 0 && iy < h && ix >= 0 && ix < w) {
                  sum += x.at((p * h + iy) * w + ix);
                  ++inside;
                }
              }
            want.push_back(sum / (includePad ? padded : inside));
          }
      expectClose(y, want, 1e-6, 1e-5,
                  "avg_pool2d " + describe(c.x, f32) + (c.ceil ? " ceil" : "") +
                      (includePad ? " include_pad" : ""));
    }
  }
  // A hand-checked case: 3x3 input, kernel 2, stride 2, padding 1, ceil:
  // windows start at -1 and 1 (the last one would start at 3 >= 3 + 1 - 1).
  HostTensor x = make(f32, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), y;
  ASSERT_OK(run("avg_pool2d", {&x}, D(f32, {1, 1, 2, 2}), &y,
                attrs({{"kernel", L({2, 2})}, {"stride", L({2, 2})}, {"padding", L({1, 1})},
                       {"ceil_mode", B(true)}})));
  expectClose(y, {1.0 / 4, (2 + 3) / 4.0, (4 + 7) / 4.0, (5 + 6 + 8 + 9) / 4.0});
}

TEST_P(KernelTest, PoolValidation) {
  Attributes a = attrs({{"kernel", L({2, 2})}, {"stride", L({2, 2})}, {"padding", L({0, 0})},
                        {"dilation", L({1, 1})}, {"ceil_mode", B(true)}});
  expectError(sig("max_pool2d", {D(f32, {1, 1, 5, 5})}, D(f32, {1, 1, 2, 2}), a),
              {"max_pool2d", "output is 1x1x2x2xf32, expected 1x1x3x3xf32"});
  expectError(sig("max_pool2d", {D(f32, {1, 5, 5})}, D(f32, {1, 2, 2}), a), {"max_pool2d", "4-D"});
  expectError(sig("max_pool2d", {D(f32, {1, 1, 5, 5})}, D(f32, {1, 1, 3, 3}),
                  attrs({{"kernel", L({2, 2})}, {"stride", L({2, 2})}, {"padding", L({2, 2})},
                         {"dilation", L({1, 1})}})),
              {"max_pool2d", "padding [2, 2] must be at most half the kernel [2, 2]"});
  expectError(sig("max_pool2d", {D(f32, {1, 1, 5, 5})}, D(f32, {1, 1, 3, 3}),
                  attrs({{"stride", L({2, 2})}, {"padding", L({0, 0})}, {"dilation", L({1, 1})}})),
              {"max_pool2d", "missing attribute 'kernel'"});
  expectError(sig("max_pool2d", {D(f32, {1, 1, 5, 5})}, D(f32, {1, 1, 3, 3}),
                  attrs({{"kernel", L({2, 2})}, {"stride", L({2, 2})}, {"padding", L({0, 0})}})),
              {"max_pool2d", "missing attribute 'dilation'"});
  expectError(sig("max_pool2d", {D(f32, {1, 1, 2, 2})}, D(f32, {1, 1, 1, 1}),
                  attrs({{"kernel", L({3, 3})}, {"stride", L({1, 1})}, {"padding", L({0, 0})},
                         {"dilation", L({1, 1})}})),
              {"max_pool2d", "larger than the padded input"});
  expectError(sig("avg_pool2d", {D(f32, {1, 1, 4, 4})}, D(f32, {1, 1, 2, 2}),
                  attrs({{"kernel", L({2, 2})}, {"stride", L({2, 2})}, {"padding", L({0, 0})},
                         {"count_include_pad", S("yes")}})),
              {"avg_pool2d", "'count_include_pad' must be a boolean"});
  expectError(sig("avg_pool2d", {D(i64, {1, 1, 4, 4})}, D(i64, {1, 1, 2, 2}),
                  attrs({{"kernel", L({2, 2})}, {"stride", L({2, 2})}, {"padding", L({0, 0})}})),
              {"avg_pool2d", "i64"});
  expectError(sig("adaptive_avg_pool2d", {D(f32, {1, 1, 4, 4})}, D(f32, {1, 1, 2}),
                  attrs({{"output_size", L({2})}})),
              {"adaptive_avg_pool2d", "'output_size' must have 2 entries"});
  expectError(sig("adaptive_avg_pool2d", {D(f32, {1, 1, 4, 4})}, D(f32, {1, 1, 2, 3}),
                  attrs({{"output_size", L({2, 2})}})),
              {"adaptive_avg_pool2d", "expected 1x1x2x2xf32"});
}

TEST_P(KernelTest, AdaptiveAvgPool2dBins) {
  struct Case { Shape x; Ints size; };
  for (const Case &c : {Case{{2, 3, 7, 7}, {1, 1}}, Case{{1, 2, 10, 9}, {3, 4}},
                        Case{{1, 1, 5, 3}, {7, 6}}, Case{{2, 2, 8, 8}, {4, 4}},
                        Case{{8, 128, 7, 7}, {1, 1}}}) {
    const int64_t h = c.x[2], w = c.x[3], oh = c.size[0], ow = c.size[1];
    HostTensor x = random(c.x), y;
    ASSERT_OK(run("adaptive_avg_pool2d", {&x}, D(f32, {c.x[0], c.x[1], oh, ow}), &y,
                  attrs({{"output_size", L(c.size)}})));
    std::vector<double> want;
    for (int64_t p = 0; p < c.x[0] * c.x[1]; ++p)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t y0 = static_cast<int64_t>(std::floor(double(oy * h) / oh));
          int64_t y1 = static_cast<int64_t>(std::ceil(double((oy + 1) * h) / oh));
          int64_t x0 = static_cast<int64_t>(std::floor(double(ox * w) / ow));
          int64_t x1 = static_cast<int64_t>(std::ceil(double((ox + 1) * w) / ow));
          double s = 0;
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix)
              s += x.at((p * h + iy) * w + ix);
          want.push_back(s / ((y1 - y0) * (x1 - x0)));
        }
    expectClose(y, want, 1e-6, 1e-5, "adaptive_avg_pool2d " + describe(c.x, f32));
  }
}

//===----------------------------------------------------------------------===//
// Data movement.
//===----------------------------------------------------------------------===//

TEST_P(KernelTest, ReshapeCopiesOrRunsInPlace) {
  HostTensor x = random({2, 3, 4}), y;
  ASSERT_OK(run("reshape", {&x}, D(f32, {6, 4}), &y));
  expectEqual(y, x.values());
  HostTensor b = randomBools({3, 5});
  ASSERT_OK(run("reshape", {&b}, D(i1, {15}), &y));
  expectEqual(y, b.values());
  // Output sharing the input's memory: nothing to do, the data stays.
  KernelFn fn;
  ASSERT_OK(prepare(sig("reshape", {x.desc}, D(f32, {4, 6})), &fn));
  void *p = nullptr;
  ASSERT_OK(backend->allocate(x.bytes.size(), &p));
  ASSERT_OK(backend->copyToDevice(p, x.bytes.data(), x.bytes.size()));
  KernelCall call;
  call.inputs = {p};
  call.outputs = {p};
  ASSERT_OK(fn(call));
  HostTensor back(f32, {2, 3, 4});
  ASSERT_OK(backend->copyToHost(back.bytes.data(), p, back.bytes.size()));
  backend->deallocate(p);
  expectEqual(back, x.values());
  expectError(sig("reshape", {D(f32, {2, 3})}, D(f32, {5})), {"reshape", "2x3xf32", "5xf32", "count"});
  expectError(sig("reshape", {D(f32, {2, 3})}, D(i32, {6})), {"reshape", "element type"});
}

TEST_P(KernelTest, PermuteAnyOrder) {
  struct Case { Shape x; Ints dims; };
  std::vector<Case> cases = {
      {{2, 3, 4, 5}, {0, 2, 1, 3}}, {{2, 3, 4, 5}, {3, 2, 1, 0}}, {{2, 3, 4, 5}, {0, 1, 3, 2}},
      {{2, 3, 4, 5}, {1, 0, 2, 3}}, {{2, 3, 4, 5}, {0, 1, 2, 3}}, {{7, 1, 5}, {2, 1, 0}},
      {{3, 70, 50}, {0, 2, 1}},     {{64, 33}, {1, 0}},           {{2, 1, 3, 1}, {3, 2, 1, 0}},
      {{4}, {0}},                   {{}, {}},                     {{2, 130, 4, 64}, {0, 2, 1, 3}},
      {{5, 6, 7}, {2, 0, 1}},       {{5, 6, 7}, {1, 2, 0}},
  };
  for (DType dt : {f32, i64, i32, i1}) {
    for (const Case &c : cases) {
      HostTensor x = dt == i1 ? randomBools(c.x) : dt == f32 ? random(c.x) : randomInts(dt, c.x, -99, 99);
      Shape out;
      for (int64_t d : c.dims)
        out.push_back(c.x[d]);
      HostTensor y;
      ASSERT_OK(run("permute", {&x}, D(dt, out), &y, attrs({{"dims", L(c.dims)}})));
      std::vector<double> want(x.numel());
      for (int64_t i = 0; i < x.numel(); ++i) {
        std::vector<int64_t> o = unravel(i, out), in(c.x.size());
        for (size_t k = 0; k < c.dims.size(); ++k)
          in[c.dims[k]] = o[k];
        want[i] = x.at(ravel(in, c.x));
      }
      expectEqual(y, want, "permute " + describe(c.x, dt));
    }
  }
  // Data movement is dtype-agnostic: bf16 moves as 2-byte elements.
  HostTensor h(bf16, {2, 3});
  for (int i = 0; i < 12; ++i)
    h.bytes[i] = static_cast<unsigned char>(i);
  HostTensor y;
  ASSERT_OK(run("permute", {&h}, D(bf16, {3, 2}), &y, attrs({{"dims", L({1, 0})}})));
  std::vector<unsigned char> want = {0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11};
  EXPECT_EQ(y.bytes, want);
  expectError(sig("permute", {D(f32, {2, 3})}, D(f32, {3, 2}), attrs({{"dims", L({0, 0})}})),
              {"permute", "not a permutation"});
  expectError(sig("permute", {D(f32, {2, 3})}, D(f32, {3, 2}), attrs({{"dims", L({1, 0, 2})}})),
              {"permute", "must list 2 dims"});
  expectError(sig("permute", {D(f32, {2, 3})}, D(f32, {2, 3}), attrs({{"dims", L({1, 0})}})),
              {"permute", "output is 2x3xf32, expected 3x2xf32"});
}

TEST_P(KernelTest, BroadcastToStretchesAndPrepends) {
  struct Case { Shape x, out; };
  for (DType dt : {f32, i64, i32, i1}) {
    for (const Case &c : {Case{{3, 1}, {2, 3, 4}}, Case{{1}, {5}}, Case{{}, {2, 2}},
                          Case{{2, 3}, {2, 3}}, Case{{1, 1, 64}, {4, 1, 64}},
                          Case{{5, 1, 7}, {3, 5, 100, 7}}}) {
      HostTensor x = dt == i1 ? randomBools(c.x) : dt == f32 ? random(c.x) : randomInts(dt, c.x, -9, 9);
      HostTensor y;
      ASSERT_OK(run("broadcast_to", {&x}, D(dt, c.out), &y));
      std::vector<double> want(numElements(c.out));
      for (int64_t i = 0; i < numElements(c.out); ++i)
        want[i] = x.at(broadcastOffset(c.out, c.x, i));
      expectEqual(y, want, "broadcast_to " + describe(c.x, dt) + " -> " + describe(c.out, dt));
    }
  }
  expectError(sig("broadcast_to", {D(f32, {3})}, D(f32, {2, 4})), {"broadcast_to", "cannot broadcast 3xf32 to 2x4xf32"});
  expectError(sig("broadcast_to", {D(f32, {2, 3})}, D(f32, {3})), {"broadcast_to", "cannot broadcast"});
  expectError(sig("broadcast_to", {D(f32, {3})}, D(i64, {3})), {"broadcast_to", "element type"});
}

TEST_P(KernelTest, SliceWithSteps) {
  struct Case { Shape x; int64_t dim, start, end, step; };
  std::vector<Case> cases = {
      {{4, 9}, 1, 2, 7, 1}, {{4, 9}, 0, 1, 4, 2}, {{3, 10, 5}, 1, 0, 10, 3}, {{3, 10, 5}, 2, 1, 4, 2},
      {{3, 10, 5}, 1, 4, 4, 1}, {{6}, 0, 0, 6, 5}, {{2, 8, 384}, 2, 128, 256, 1}, {{5, 3}, 0, 2, 5, 1},
  };
  for (DType dt : {f32, i64, i32, i1}) {
    for (const Case &c : cases) {
      HostTensor x = dt == i1 ? randomBools(c.x) : dt == f32 ? random(c.x) : randomInts(dt, c.x, -9, 9);
      int64_t count = c.end == c.start ? 0 : 1 + (c.end - c.start - 1) / c.step;
      Shape out = c.x;
      out[c.dim] = count;
      HostTensor y;
      Attributes a = attrs({{"dim", I(c.dim)}, {"start", I(c.start)}, {"end", I(c.end)},
                            {"step", I(c.step)}});
      ASSERT_OK(run("slice", {&x}, D(dt, out), &y, a));
      std::vector<double> want(numElements(out));
      for (int64_t i = 0; i < numElements(out); ++i) {
        std::vector<int64_t> idx = unravel(i, out);
        idx[c.dim] = c.start + idx[c.dim] * c.step;
        want[i] = x.at(ravel(idx, c.x));
      }
      expectEqual(y, want, "slice " + describe(c.x, dt) + " dim " + std::to_string(c.dim));
    }
  }
  // step defaults to 1.
  HostTensor x = make(f32, {5}, {0, 1, 2, 3, 4}), y;
  ASSERT_OK(run("slice", {&x}, D(f32, {3}), &y,
                attrs({{"dim", I(0)}, {"start", I(1)}, {"end", I(4)}})));
  expectEqual(y, {1, 2, 3});
  Attributes bad = attrs({{"dim", I(0)}, {"start", I(2)}, {"end", I(6)}});
  expectError(sig("slice", {D(f32, {5})}, D(f32, {4}), bad), {"slice", "[2:6:1]", "size 5"});
  expectError(sig("slice", {D(f32, {5})}, D(f32, {1}),
                  attrs({{"dim", I(0)}, {"start", I(0)}, {"end", I(1)}, {"step", I(0)}})),
              {"slice", "step >= 1"});
  expectError(sig("slice", {D(f32, {5})}, D(f32, {1}),
                  attrs({{"dim", I(1)}, {"start", I(0)}, {"end", I(1)}})),
              {"slice", "dim 1 is out of range for rank 1"});
  expectError(sig("slice", {D(f32, {5})}, D(f32, {2}),
                  attrs({{"dim", I(0)}, {"start", I(0)}, {"end", I(5)}, {"step", I(2)}})),
              {"slice", "expected 3xf32"});
  expectError(sig("slice", {D(f32, {5})}, D(f32, {2}), attrs({{"dim", I(0)}, {"start", I(0)}})),
              {"slice", "missing attribute 'end'"});
}

TEST_P(KernelTest, ConcatAlongAnyDim) {
  struct Case { std::vector<Shape> xs; int64_t dim; };
  std::vector<Case> cases = {
      {{{2, 3, 4}, {2, 1, 4}, {2, 5, 4}}, 1}, {{{2, 3}, {4, 3}}, 0}, {{{2, 3}, {2, 1}, {2, 0}}, 1},
      {{{3, 4}}, 1}, {{{4, 1, 64}, {4, 16, 64}}, 1}, {{{100, 300}, {100, 200}}, 1},
  };
  for (DType dt : {f32, i64, i32, i1}) {
    for (const Case &c : cases) {
      std::vector<HostTensor> xs;
      for (const Shape &s : c.xs)
        xs.push_back(dt == i1 ? randomBools(s) : dt == f32 ? random(s) : randomInts(dt, s, -9, 9));
      std::vector<const HostTensor *> inputs;
      Shape out = c.xs[0];
      out[c.dim] = 0;
      for (const HostTensor &x : xs) {
        inputs.push_back(&x);
        out[c.dim] += x.desc.shape[c.dim];
      }
      HostTensor y;
      ASSERT_OK(run("concat", inputs, D(dt, out), &y, attrs({{"dim", I(c.dim)}})));
      std::vector<double> want(numElements(out));
      for (int64_t i = 0; i < numElements(out); ++i) {
        std::vector<int64_t> idx = unravel(i, out);
        size_t k = 0;
        while (idx[c.dim] >= xs[k].desc.shape[c.dim]) {
          idx[c.dim] -= xs[k].desc.shape[c.dim];
          ++k;
        }
        want[i] = xs[k].at(ravel(idx, xs[k].desc.shape));
      }
      expectEqual(y, want, "concat " + std::string(dtypeName(dt)) + " dim " + std::to_string(c.dim));
    }
  }
  Attributes a = attrs({{"dim", I(1)}});
  expectError(sig("concat", {D(f32, {2, 3}), D(f32, {3, 3})}, D(f32, {2, 6}), a),
              {"concat", "input 1 3x3xf32 does not match input 0 2x3xf32"});
  expectError(sig("concat", {D(f32, {2, 3}), D(i64, {2, 3})}, D(f32, {2, 6}), a),
              {"concat", "input 1"});
  expectError(sig("concat", {D(f32, {2, 3}), D(f32, {2, 3})}, D(f32, {2, 5}), a),
              {"concat", "expected 2x6xf32"});
  expectError(sig("concat", {}, D(f32, {2, 5}), a), {"concat", "at least 1 input"});
  expectError(sig("concat", {D(f32, {2, 3})}, D(f32, {2, 3}), attrs({{"dim", I(2)}})),
              {"concat", "dim 2 is out of range"});
}

//===----------------------------------------------------------------------===//
// Fused attention.
//===----------------------------------------------------------------------===//

/// softmax(scale * q k^T) v per batch and head, in doubles, the scores
/// formed whole; with `causal`, query i sees keys j <= i + (Sk - Sq). A
/// query that sees no finite score gets NaN, as softmax gives.
std::vector<double> refAttention(const HostTensor &q, const HostTensor &k, const HostTensor &v,
                                 bool causal, double scale) {
  const Shape &qs = q.desc.shape;
  const int64_t heads = qs[0] * qs[1], sq = qs[2], d = qs[3];
  const int64_t sk = k.desc.shape[2], dv = v.desc.shape[3];
  std::vector<double> out(heads * sq * dv);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < sq; ++i) {
      std::vector<double> scores(sk, -kInf);
      double mx = -kInf;
      for (int64_t j = 0; j < sk; ++j) {
        if (causal && j > i + sk - sq)
          continue;
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += q.at((h * sq + i) * d + c) * k.at((h * sk + j) * d + c);
        scores[j] = dot * scale;
        mx = std::max(mx, scores[j]);
      }
      double sum = 0;
      for (double &sc : scores) {
        sc = std::exp(sc - mx);
        sum += sc;
      }
      for (int64_t c = 0; c < dv; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < sk; ++j)
          acc += scores[j] * v.at((h * sk + j) * dv + c);
        out[(h * sq + i) * dv + c] = acc / sum;
      }
    }
  return out;
}

TEST_P(KernelTest, AttentionMatchesReference) {
  // Sizes around the kernel's blocks (32 queries, 64 keys) and off them,
  // more keys than queries (causal rows then start past the diagonal) and
  // fewer (non-causal only), v with its own head dim, negative scales.
  struct Case {
    Shape q, k, v;
    bool causal;
    double scale;
  };
  const std::vector<Case> cases = {
      {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, true, 1.0},
      {{2, 3, 37, 16}, {2, 3, 37, 16}, {2, 3, 37, 16}, true, 0.25},
      {{2, 3, 37, 16}, {2, 3, 37, 16}, {2, 3, 37, 16}, false, 0.25},
      {{1, 2, 130, 64}, {1, 2, 130, 64}, {1, 2, 130, 64}, true, 0.125},
      {{1, 2, 5, 8}, {1, 2, 70, 8}, {1, 2, 70, 8}, true, 0.35},
      {{1, 2, 33, 8}, {1, 2, 129, 8}, {1, 2, 129, 24}, true, -0.3},
      {{1, 2, 70, 8}, {1, 2, 5, 8}, {1, 2, 5, 3}, false, 0.5},
      {{3, 1, 65, 7}, {3, 1, 65, 7}, {3, 1, 65, 9}, false, 1.0},
  };
  for (const Case &c : cases) {
    HostTensor q = random(c.q), k = random(c.k), v = random(c.v), y;
    Shape out = {c.q[0], c.q[1], c.q[2], c.v[3]};
    ASSERT_OK(run("attention", {&q, &k, &v}, D(f32, out), &y,
                  attrs({{"causal", B(c.causal)}, {"scale", F(c.scale)}})));
    expectClose(y, refAttention(q, k, v, c.causal, c.scale), 1e-6, 1e-5,
                std::string(c.causal ? "causal " : "") + "attention q " + describe(c.q, f32) +
                    " k " + describe(c.k, f32));
  }
  // Large scores: the online softmax's rescaling must not overflow.
  HostTensor q = random({1, 1, 80, 4}, -30, 30), k = random({1, 1, 80, 4}, -30, 30),
             v = random({1, 1, 80, 4}), y;
  ASSERT_OK(run("attention", {&q, &k, &v}, D(f32, {1, 1, 80, 4}), &y,
                attrs({{"causal", B(true)}, {"scale", F(1.0)}})));
  expectClose(y, refAttention(q, k, v, true, 1.0), 1e-6, 1e-5, "large scores");
}

TEST_P(KernelTest, AttentionRowsThatSeeNoKey) {
  // Causal with fewer keys than queries: query i sees keys j <= i + (Sk - Sq),
  // so the first Sq - Sk rows see none and are zeros; the others are the
  // reference's. No keys at all: every row is zeros.
  HostTensor q = random({1, 2, 7, 4}), k = random({1, 2, 3, 4}), v = random({1, 2, 3, 5}), y;
  ASSERT_OK(run("attention", {&q, &k, &v}, D(f32, {1, 2, 7, 5}), &y,
                attrs({{"causal", B(true)}, {"scale", F(0.5)}})));
  std::vector<double> want = refAttention(q, k, v, true, 0.5);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t c = 0; c < 5; ++c)
        want[(h * 7 + i) * 5 + c] = 0;
  expectClose(y, want, 1e-6, 1e-5, "causal, 7 queries, 3 keys");
  HostTensor none(f32, {1, 2, 0, 4}), noValues(f32, {1, 2, 0, 5});
  ASSERT_OK(run("attention", {&q, &none, &noValues}, D(f32, {1, 2, 7, 5}), &y,
                attrs({{"causal", B(false)}, {"scale", F(0.5)}})));
  expectClose(y, std::vector<double>(2 * 7 * 5, 0.0), 0, 0, "no keys");
}

TEST_P(KernelTest, AttentionValidation) {
  // Messages name the operands' shapes; the contract's checks only (a
  // compiled plan always carries `scale`; without it, 1/sqrt(D) applies).
  Attributes a = attrs({{"causal", B(true)}, {"scale", F(0.5)}});
  TensorDesc q = D(f32, {2, 4, 8, 16});
  expectError(sig("attention", {q, q}, q, a), {"attention", "3 inputs"});
  expectError(sig("attention", {D(f32, {4, 8, 16}), q, q}, q, a), {"attention", "4x8x16xf32"});
  expectError(sig("attention", {q, D(f32, {2, 2, 8, 16}), D(f32, {2, 2, 8, 16})}, q, a),
              {"attention", "2x2x8x16xf32"});
  expectError(sig("attention", {q, D(f32, {2, 4, 8, 32}), q}, q, a),
              {"attention", "2x4x8x32xf32"});
  expectError(sig("attention", {q, q, D(f32, {2, 4, 9, 16})}, q, a),
              {"attention", "2x4x9x16xf32"});
  expectError(sig("attention", {q, q, D(f32, {2, 4, 8, 32})}, q, a),
              {"attention", "2x4x8x32xf32"});
  expectError(sig("attention", {q, q, q}, q, attrs({{"causal", S("yes")}, {"scale", F(1)}})),
              {"attention", "'causal'"});
  expectError(sig("attention", {q, q, q}, q, attrs({{"causal", B(false)}, {"scale", S("1")}})),
              {"attention", "'scale'"});
  expectError(sig("attention", {D(i64, {2, 4, 8, 16}), q, q}, q, a), {"attention", "i64"});
  expectError(sig("attention", {q, D(i64, {2, 4, 8, 16}), q}, q, a), {"attention", "k"});
  // The default scale: the same as an explicit 1/sqrt(D).
  HostTensor x = random({1, 1, 5, 16}), withDefault, explicitScale;
  ASSERT_OK(run("attention", {&x, &x, &x}, x.desc, &withDefault, attrs({{"causal", B(true)}})));
  ASSERT_OK(run("attention", {&x, &x, &x}, x.desc, &explicitScale,
                attrs({{"causal", B(true)}, {"scale", F(0.25)}})));
  expectClose(withDefault, explicitScale.values(), 0, 0, "default scale");
}

//===----------------------------------------------------------------------===//
// Linear algebra: lu_factor, lu_pivots_to_permutation, cholesky,
// triangular_solve on small matrices (values worked by hand, and random
// batches checked by reconstructing the input from the results).
//===----------------------------------------------------------------------===//

/// The input of lu_factor rebuilt from its outputs (one [m, n] matrix at
/// `offset`): P L U, the swaps undone in reverse order.
std::vector<double> rebuildFromLu(const HostTensor &lu, const HostTensor &pivots, int64_t matrix,
                                  int64_t m, int64_t n) {
  const int64_t k = std::min(m, n);
  std::vector<double> a(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t t = 0; t <= std::min({i, j, k - 1}); ++t) {
        double l = t == i ? 1.0 : lu.at(matrix * m * n + i * n + t);
        s += l * lu.at(matrix * m * n + t * n + j);
      }
      a[i * n + j] = s;
    }
  for (int64_t j = k - 1; j >= 0; --j) {
    int64_t p = static_cast<int64_t>(pivots.at(matrix * k + j)) - 1;
    for (int64_t c = 0; c < n; ++c)
      std::swap(a[j * n + c], a[p * n + c]);
  }
  return a;
}

TEST_P(KernelTest, LuFactorPivotsAsGetrf) {
  auto lu = [&](const HostTensor &x, Shape batch, int64_t m, int64_t n,
                std::vector<HostTensor> *ys) {
    Shape piv = batch, info = batch;
    piv.push_back(std::min(m, n));
    KernelSignature s = sig("lu_factor", {x.desc}, x.desc);
    s.outputs.push_back(D(i32, piv));
    s.outputs.push_back(D(i32, info));
    ASSERT_OK(runAll(s, {&x}, ys));
  };
  std::vector<HostTensor> ys;
  // Column 0's largest |value| is in row 1: swapped up.
  lu(make(f32, {2, 2}, {1, 2, 3, 4}), {}, 2, 2, &ys);
  expectClose(ys[0], {3, 4, 1.0 / 3, 2.0 / 3}, 1e-6, 1e-6, "lu");
  expectEqual(ys[1], {2, 2}, "pivots");
  expectEqual(ys[2], {0}, "info");
  // A tie in |value| (2 and -2) takes the first row; then row 2 pivots.
  lu(make(f32, {3, 3}, {2, 1, 1, -2, 3, 1, 1, 1, 1}), {}, 3, 3, &ys);
  expectClose(ys[0], {2, 1, 1, -1, 4, 2, 0.5, 0.125, 0.25}, 1e-6, 1e-6, "tie lu");
  expectEqual(ys[1], {1, 2, 3}, "tie pivots");
  // Singular: the last pivot is exactly 0, info names it (1-based).
  lu(make(f32, {2, 2}, {1, 2, 2, 4}), {}, 2, 2, &ys);
  expectEqual(ys[0], {2, 4, 0.5, 0}, "singular lu");
  expectEqual(ys[1], {2, 2}, "singular pivots");
  expectEqual(ys[2], {2}, "singular info");
  // A zero column: no swap, no scaling, info 1, the factorization goes on.
  lu(make(f32, {2, 2}, {0, 1, 0, 2}), {}, 2, 2, &ys);
  expectEqual(ys[0], {0, 1, 0, 2}, "zero column lu");
  expectEqual(ys[1], {1, 2}, "zero column pivots");
  expectEqual(ys[2], {1}, "zero column info");
  // Random batches, square and rectangular: P L U rebuilds the input and
  // every multiplier is at most 1 in magnitude (partial pivoting).
  struct Case { Shape batch; int64_t m, n; };
  for (const Case &c : std::vector<Case>{{{3}, 4, 4}, {{2, 2}, 3, 5}, {{2}, 5, 3}, {{}, 1, 1}}) {
    Shape shape = c.batch;
    shape.push_back(c.m);
    shape.push_back(c.n);
    HostTensor x = random(shape);
    lu(x, c.batch, c.m, c.n, &ys);
    const int64_t count = numElements(c.batch);
    for (int64_t b = 0; b < count; ++b) {
      std::vector<double> rebuilt = rebuildFromLu(ys[0], ys[1], b, c.m, c.n);
      for (int64_t i = 0; i < c.m * c.n; ++i) {
        EXPECT_NEAR(rebuilt[i], x.at(b * c.m * c.n + i), 1e-5) << describe(shape, f32);
        int64_t row = i / c.n, col = i % c.n;
        if (row > col) {
          EXPECT_LE(std::fabs(ys[0].at(b * c.m * c.n + i)), 1.0);
        }
      }
      EXPECT_EQ(ys[2].at(b), 0);
    }
  }
  // An empty batch writes nothing.
  lu(HostTensor(f32, {0, 3, 3}), {0}, 3, 3, &ys);
}

TEST_P(KernelTest, LuPivotsToPermutation) {
  HostTensor pivots = make(i32, {2, 3}, {2, 3, 3, 1, 2, 3});
  KernelSignature s = sig("lu_pivots_to_permutation", {pivots.desc}, D(i64, {2, 3}),
                          attrs({{"rows", I(3)}}));
  HostTensor y;
  ASSERT_OK(run(s, {&pivots}, &y));
  expectEqual(y, {1, 2, 0, 0, 1, 2});
  // More rows than pivots (a wide LU's [m] rows from min(m, n) pivots).
  HostTensor wide = make(i64, {2}, {3, 3});
  ASSERT_OK(run(sig("lu_pivots_to_permutation", {wide.desc}, D(i64, {4}), attrs({{"rows", I(4)}})),
                {&wide}, &y));
  expectEqual(y, {2, 0, 1, 3});
  // A pivot outside [1, rows] is a run-time error naming it.
  HostTensor bad = make(i32, {2}, {1, 5});
  Status status =
      run(sig("lu_pivots_to_permutation", {bad.desc}, D(i64, {2}), attrs({{"rows", I(2)}})),
          {&bad}, &y);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("pivot 5"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("outside [1, 2]"), std::string::npos) << status.message();
}

TEST_P(KernelTest, CholeskyAndItsInfo) {
  auto chol = [&](const HostTensor &x, bool upper, Shape batch, std::vector<HostTensor> *ys) {
    KernelSignature s = sig("cholesky", {x.desc}, x.desc, attrs({{"upper", B(upper)}}));
    s.outputs.push_back(D(i32, batch));
    ASSERT_OK(runAll(s, {&x}, ys));
  };
  std::vector<HostTensor> ys;
  const double r2 = std::sqrt(2.0);
  chol(make(f32, {2, 2}, {4, 2, 2, 3}), false, {}, &ys);
  expectClose(ys[0], {2, 0, 1, r2}, 1e-6, 1e-6, "L");
  expectEqual(ys[1], {0}, "info");
  // upper reads the upper triangle only (the lower one is garbage here).
  chol(make(f32, {2, 2}, {4, 2, -100, 3}), true, {}, &ys);
  expectClose(ys[0], {2, 1, 0, r2}, 1e-6, 1e-6, "U");
  // lower reads the lower triangle only.
  chol(make(f32, {2, 2}, {4, 77, 2, 3}), false, {}, &ys);
  expectClose(ys[0], {2, 0, 1, r2}, 1e-6, 1e-6, "L of the lower triangle");
  // Not positive definite at order 2: info 2, column 0 factored, the failed
  // diagonal holds 1 - 2^2 as potf2 leaves it; a batch reports each matrix.
  chol(make(f32, {3, 2, 2}, {1, 2, 2, 1, 4, 2, 2, 3, -1, 0, 0, 1}), false, {3}, &ys);
  expectEqual(ys[1], {2, 0, 1}, "info per matrix");
  EXPECT_EQ(ys[0].at(0), 1);
  EXPECT_EQ(ys[0].at(2), 2);
  EXPECT_EQ(ys[0].at(3), -3);
  EXPECT_EQ(ys[0].at(1), 0);
  // A NaN fails too.
  chol(make(f32, {1, 1}, {kNaN}), false, {}, &ys);
  expectEqual(ys[1], {1}, "NaN info");
  // Random SPD batches: L L^T rebuilds them.
  const int64_t n = 5, count = 3;
  HostTensor g = random({count, n, n});
  std::vector<double> spd(count * n * n);
  for (int64_t b = 0; b < count; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = i == j ? n : 0;
        for (int64_t t = 0; t < n; ++t)
          s += g.at(b * n * n + i * n + t) * g.at(b * n * n + j * n + t);
        spd[b * n * n + i * n + j] = s;
      }
  HostTensor a = make(f32, {count, n, n}, spd);
  for (bool upper : {false, true}) {
    chol(a, upper, {count}, &ys);
    expectEqual(ys[1], {0, 0, 0}, "spd info");
    for (int64_t b = 0; b < count; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t t = 0; t < n; ++t) {
            double li = upper ? ys[0].at(b * n * n + t * n + i) : ys[0].at(b * n * n + i * n + t);
            double lj = upper ? ys[0].at(b * n * n + t * n + j) : ys[0].at(b * n * n + j * n + t);
            s += li * lj;
          }
          EXPECT_NEAR(s, a.at(b * n * n + i * n + j), 1e-4);
          bool outside = upper ? i > j : j > i;
          if (outside) {
            EXPECT_EQ(ys[0].at(b * n * n + i * n + j), 0);
          }
        }
  }
}

TEST_P(KernelTest, TriangularSolveAsTrsm) {
  auto solve = [&](const HostTensor &a, const HostTensor &b, Shape out, bool upper,
                   bool transpose, bool unit, HostTensor *x) {
    ASSERT_OK(run(sig("triangular_solve", {a.desc, b.desc}, D(f32, out),
                      attrs({{"upper", B(upper)}, {"transpose", B(transpose)},
                             {"unitriangular", B(unit)}})),
                  {&a, &b}, x));
  };
  HostTensor x;
  // Upper: x1 = 8 / 4, x0 = (4 - x1) / 2; the lower triangle (9) is unread.
  HostTensor u = make(f32, {2, 2}, {2, 1, 9, 4});
  solve(u, make(f32, {2, 1}, {4, 8}), {2, 1}, true, false, false, &x);
  expectClose(x, {1, 2}, 1e-6, 1e-6, "upper");
  // Transposed: U^T x = b, a lower solve with U's columns.
  solve(u, make(f32, {2, 1}, {4, 8}), {2, 1}, true, true, false, &x);
  expectClose(x, {2, 1.5}, 1e-6, 1e-6, "upper transposed");
  // Unit lower: the diagonal (2, 4) is taken as ones.
  HostTensor l = make(f32, {2, 2}, {2, 7, 3, 4});
  solve(l, make(f32, {2, 1}, {1, 5}), {2, 1}, false, false, true, &x);
  expectClose(x, {1, 2}, 1e-6, 1e-6, "unit lower");
  // A zero diagonal: a zero right-hand side skips its division (0, not
  // NaN), a non-zero one divides by 0.
  HostTensor singular = make(f32, {2, 2}, {0, 1, 0, 1});
  solve(singular, make(f32, {2, 2}, {1, 1, 1, 2}), {2, 2}, true, false, false, &x);
  EXPECT_EQ(x.at(0), 0);
  EXPECT_EQ(x.at(1), -kInf);
  EXPECT_EQ(x.at(2), 1);
  EXPECT_EQ(x.at(3), 2);
  // Random broadcast batches in every mode: op(A) X rebuilds B.
  const int64_t n = 4, k = 3;
  HostTensor a = random({2, 1, n, n});
  for (int64_t i = 0; i < a.numel(); ++i)
    if ((i / n) % n == i % n)
      a.as<float>()[i] = 3 + std::fabs(a.as<float>()[i]); // well conditioned
  HostTensor b = random({3, n, k});
  for (bool upper : {false, true})
    for (bool transpose : {false, true})
      for (bool unit : {false, true}) {
        solve(a, b, {2, 3, n, k}, upper, transpose, unit, &x);
        for (int64_t ai = 0; ai < 2; ++ai)
          for (int64_t bi = 0; bi < 3; ++bi)
            for (int64_t r = 0; r < n; ++r)
              for (int64_t c = 0; c < k; ++c) {
                double s = 0;
                for (int64_t t = 0; t < n; ++t) {
                  int64_t i = transpose ? t : r, j = transpose ? r : t;
                  bool inside = upper ? j >= i : j <= i;
                  double v = !inside ? 0 : (unit && i == j) ? 1 : a.at(ai * n * n + i * n + j);
                  s += v * x.at(((ai * 3 + bi) * n + t) * k + c);
                }
                EXPECT_NEAR(s, b.at((bi * n + r) * k + c), 1e-4)
                    << "upper " << upper << " transpose " << transpose << " unit " << unit;
              }
      }
}

TEST_P(KernelTest, LinalgValidation) {
  KernelSignature lu = sig("lu_factor", {D(i64, {3, 3})}, D(i64, {3, 3}));
  lu.outputs.push_back(D(i32, {3}));
  lu.outputs.push_back(D(i32, {}));
  expectError(lu, {"lu_factor"});
  KernelSignature vector = sig("lu_factor", {D(f32, {3})}, D(f32, {3}));
  vector.outputs.push_back(D(i32, {1}));
  vector.outputs.push_back(D(i32, {}));
  expectError(vector, {"lu_factor", "rank >= 2"});
  KernelSignature pivots64 = sig("lu_factor", {D(f32, {2, 3, 4})}, D(f32, {2, 3, 4}));
  pivots64.outputs.push_back(D(i64, {2, 3}));
  pivots64.outputs.push_back(D(i32, {2}));
  expectError(pivots64, {"lu_factor", "pivots output"});
  KernelSignature rect = sig("cholesky", {D(f32, {3, 4})}, D(f32, {3, 4}));
  rect.outputs.push_back(D(i32, {}));
  expectError(rect, {"cholesky", "square"});
  expectError(sig("triangular_solve", {D(f32, {3, 4}), D(f32, {3, 1})}, D(f32, {3, 1})),
              {"triangular_solve", "square"});
  expectError(sig("triangular_solve", {D(f32, {3, 3}), D(f32, {4, 1})}, D(f32, {4, 1})),
              {"triangular_solve", "3 rows"});
  expectError(sig("triangular_solve", {D(f32, {2, 3, 3}), D(f32, {4, 3, 1})}, D(f32, {4, 3, 1})),
              {"triangular_solve", "do not broadcast"});
  expectError(sig("lu_pivots_to_permutation", {D(i32, {4})}, D(i64, {3}), attrs({{"rows", I(3)}})),
              {"lu_pivots_to_permutation", "at least the 4 pivots"});
}

//===----------------------------------------------------------------------===//
// Training kernels, family A (docs/plan-format.md, "Training kernels").
//===----------------------------------------------------------------------===//

/// A signature with several outputs.
KernelSignature sigN(const std::string &kernel, std::vector<std::optional<TensorDesc>> inputs,
                     std::vector<TensorDesc> outputs, Attributes a = {}) {
  KernelSignature s;
  s.kernel = kernel;
  s.inputs = std::move(inputs);
  s.outputs = std::move(outputs);
  s.attrs = std::move(a);
  return s;
}

/// Runs `kernel` with outputs `outs`, whose current contents are copied in
/// first (the persistent tensors an update reads and writes) and read back
/// after.
Status runOutputs(Backend &backend, const std::string &kernel,
                  const std::vector<const HostTensor *> &inputs, std::vector<HostTensor> *outs,
                  Attributes a = {}) {
  std::vector<std::optional<TensorDesc>> descs;
  for (const HostTensor *in : inputs)
    descs.push_back(in ? std::optional<TensorDesc>(in->desc) : std::nullopt);
  std::vector<TensorDesc> outDescs;
  for (const HostTensor &o : *outs)
    outDescs.push_back(o.desc);
  KernelFn fn;
  CLEAVE_RETURN_IF_ERROR(backend.prepareKernel(sigN(kernel, descs, outDescs, std::move(a)), &fn));
  KernelCall call;
  std::vector<void *> owned;
  auto body = [&]() -> Status {
    auto upload = [&](const HostTensor &t, void **p) -> Status {
      CLEAVE_RETURN_IF_ERROR(backend.allocate(t.bytes.size(), p));
      owned.push_back(*p);
      return backend.copyToDevice(*p, t.bytes.data(), t.bytes.size());
    };
    for (const HostTensor *in : inputs) {
      void *p = nullptr;
      if (in)
        CLEAVE_RETURN_IF_ERROR(upload(*in, &p));
      call.inputs.push_back(p);
    }
    for (const HostTensor &o : *outs) {
      void *p = nullptr;
      CLEAVE_RETURN_IF_ERROR(upload(o, &p));
      call.outputs.push_back(p);
    }
    CLEAVE_RETURN_IF_ERROR(fn(call));
    CLEAVE_RETURN_IF_ERROR(backend.synchronize());
    for (size_t i = 0; i < outs->size(); ++i)
      CLEAVE_RETURN_IF_ERROR(
          backend.copyToHost((*outs)[i].bytes.data(), call.outputs[i], (*outs)[i].bytes.size()));
    return {};
  };
  Status status = body();
  for (void *p : owned)
    backend.deallocate(p);
  return status;
}

/// An output that starts as garbage.
HostTensor garbage(Shape shape, DType dtype = f32) {
  HostTensor t(dtype, std::move(shape));
  std::fill(t.bytes.begin(), t.bytes.end(), 0xA5);
  return t;
}

HostTensor stepTensor(int64_t t) { return make(i64, {}, {static_cast<double>(t)}); }

/// Skips a test on a backend that does not have the training kernels yet.
#define REQUIRE_KERNEL(name)                                                   \
  do {                                                                         \
    if (!backend->hasKernel(name))                                             \
      GTEST_SKIP() << GetParam() << " has no '" << name << "' kernel yet";     \
  } while (0)

/// Central differences of a scalar function of `x` (double), one element at
/// a time.
std::vector<double> numericGradient(std::vector<double> x,
                                    const std::function<double(const std::vector<double> &)> &f,
                                    double h = 1e-4) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double keep = x[i];
    x[i] = keep + h;
    double up = f(x);
    x[i] = keep - h;
    double down = f(x);
    x[i] = keep;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

TEST(Philox, KnownAnswersOfRandom123) {
  using philox::Uint4;
  auto expect = [](Uint4 counter, uint32_t k0, uint32_t k1, Uint4 want) {
    Uint4 got = philox::philox4x32_10(counter, k0, k1);
    EXPECT_EQ(got.x, want.x);
    EXPECT_EQ(got.y, want.y);
    EXPECT_EQ(got.z, want.z);
    EXPECT_EQ(got.w, want.w);
  };
  expect({0, 0, 0, 0}, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  expect({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff,
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  expect({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0xa4093822, 0x299f31d0,
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST(Philox, DropoutMaskLayout) {
  // key = (seed mod 2^32, seed / 2^32), counter = (block lo, block hi, stream, t).
  const uint64_t seed = 0x0000000500000007ull;
  philox::DropoutMask mask(seed, 3, 9, 0.25);
  EXPECT_EQ(mask.key0, 7u);
  EXPECT_EQ(mask.key1, 5u);
  EXPECT_EQ(mask.threshold, 1u << 22);
  const uint64_t block = 0x0000000200000001ull;
  philox::Uint4 got = mask.words(block), want = philox::philox4x32_10({1, 2, 3, 9}, 7, 5);
  EXPECT_EQ(got.x, want.x);
  EXPECT_EQ(got.w, want.w);
  // u >= p exactly: u = k·2^-24.
  EXPECT_FALSE(mask.keeps(((1u << 22) - 1) << 8));
  EXPECT_TRUE(mask.keeps((1u << 22) << 8));
  EXPECT_EQ(philox::DropoutMask::thresholdOf(0.1), static_cast<uint32_t>(std::ceil(0.1 * 16777216)));
  EXPECT_EQ(philox::dropoutScale(0.1), static_cast<float>(1 / 0.9));
}

TEST_P(KernelTest, AssignCopiesIntoTheTarget) {
  REQUIRE_KERNEL("assign");
  for (const Shape &shape : {Shape{}, Shape{3, 5}, Shape{300, 257}}) {
    HostTensor value = random(shape);
    std::vector<HostTensor> target = {random(shape)};
    ASSERT_OK(runOutputs(*backend, "assign", {&value}, &target));
    expectEqual(target[0], value.values(), "assign f32");
  }
  HostTensor step = stepTensor(41);
  std::vector<HostTensor> counter = {stepTensor(40)};
  ASSERT_OK(runOutputs(*backend, "assign", {&step}, &counter));
  EXPECT_EQ(counter[0].as<int64_t>()[0], 41);
  expectError(sig("assign", {D(f32, {2, 3})}, D(f32, {3, 2})),
              {"assign", "value 2x3xf32", "target 3x2xf32"});
  expectError(sig("assign", {D(i64, {})}, D(f32, {})), {"assign", "i64", "f32"});
  expectError(sig("assign", {D(f32, {2}), D(f32, {2})}, D(f32, {2})),
              {"assign", "expects 1 input, got 2"});
}

// A part of the step's batch (samples [o, o + n), rows of 3 elements each:
// dim 0 is 2 rows per sample) draws the whole batch's elements for them,
// whatever block of 4 it starts in.
TEST_P(KernelTest, DropoutTrainPartsDrawTheWholeBatchsMask) {
  REQUIRE_KERNEL("dropout_train");
  const int64_t batch = 6, rows = 2, cols = 3;
  HostTensor whole = random({batch * rows, cols}), step = stepTensor(5), all;
  Attributes base = attrs({{"p", F(0.4)}, {"seed", I(9)}, {"stream", I(1)}});
  ASSERT_OK(run("dropout_train", {&whole, &step}, whole.desc, &all, base));
  for (auto [offset, samples] : {std::pair<int64_t, int64_t>{0, 6}, {1, 2}, {3, 3}, {5, 1}}) {
    std::vector<double> values(samples * rows * cols), want(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = whole.as<float>()[offset * rows * cols + i];
      want[i] = all.as<float>()[offset * rows * cols + i];
    }
    HostTensor x = make(f32, {samples * rows, cols}, values), first = stepTensor(offset), y;
    Attributes withSamples = base;
    withSamples.set("samples", I(samples));
    ASSERT_OK(run("dropout_train", {&x, &step, &first}, x.desc, &y, withSamples));
    expectEqual(y, want, "samples " + std::to_string(offset) + " + " + std::to_string(samples));
  }
  Attributes withSamples = base;
  withSamples.set("samples", I(4));
  expectError(sig("dropout_train", {D(f32, {6, 3}), D(i64, {}), D(i64, {})}, D(f32, {6, 3}),
                  withSamples),
              {"dropout_train", "dim 0 of the input is not the rows of 4 samples"});
  withSamples.set("samples", I(2));
  expectError(sig("dropout_train", {D(f32, {6, 3}), D(i64, {})}, D(f32, {6, 3}), withSamples),
              {"dropout_train", "'samples' needs the sample_offset input"});
}

TEST_P(KernelTest, DropoutTrainUsesPhilox) {
  REQUIRE_KERNEL("dropout_train");
  const double p = 0.3;
  const int64_t seed = (int64_t(3) << 32) + 11, stream = 2;
  for (const Shape &shape : {Shape{3, 37, 11}, Shape{1}, Shape{513, 257}}) {
    HostTensor x = random(shape);
    for (int64_t t : {1, 7}) {
      HostTensor step = stepTensor(t), y;
      ASSERT_OK(run("dropout_train", {&x, &step}, x.desc, &y,
                    attrs({{"p", F(p)}, {"seed", I(seed)}, {"stream", I(stream)}})));
      // The contract, spelled out.
      const float scale = static_cast<float>(1 / (1 - p));
      std::vector<double> want(x.numel());
      int64_t kept = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        uint64_t block = static_cast<uint64_t>(i / 4);
        philox::Uint4 w = philox::philox4x32_10(
            {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
             static_cast<uint32_t>(stream), static_cast<uint32_t>(t)},
            static_cast<uint32_t>(seed), static_cast<uint32_t>(uint64_t(seed) >> 32));
        uint32_t word = (i % 4 == 0) ? w.x : (i % 4 == 1) ? w.y : (i % 4 == 2) ? w.z : w.w;
        double u = static_cast<double>(word >> 8) * std::ldexp(1.0, -24);
        bool keep = u >= p;
        kept += keep;
        want[i] = keep ? static_cast<double>(x.as<float>()[i] * scale) : 0.0;
      }
      expectEqual(y, want, "dropout_train " + describe(shape, f32));
      if (x.numel() > 10000) {
        double rate = static_cast<double>(kept) / x.numel();
        EXPECT_NEAR(rate, 1 - p, 0.01);
      }
    }
  }
  // Another stream draws another mask; the same step draws the same one.
  HostTensor x = make(f32, {4096}, std::vector<double>(4096, 1.0)), step = stepTensor(3);
  HostTensor a, b, c;
  Attributes base = attrs({{"p", F(0.5)}, {"seed", I(0)}, {"stream", I(0)}});
  ASSERT_OK(run("dropout_train", {&x, &step}, x.desc, &a, base));
  ASSERT_OK(run("dropout_train", {&x, &step}, x.desc, &b, base));
  ASSERT_OK(run("dropout_train", {&x, &step}, x.desc, &c,
                attrs({{"p", F(0.5)}, {"seed", I(0)}, {"stream", I(1)}})));
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_NE(a.bytes, c.bytes);

  Attributes ok = attrs({{"p", F(0.1)}, {"seed", I(0)}, {"stream", I(0)}});
  expectError(sig("dropout_train", {D(f32, {4}), D(i32, {})}, D(f32, {4}), ok),
              {"dropout_train", "step", "i32"});
  expectError(sig("dropout_train", {D(f32, {4}), D(i64, {1})}, D(f32, {4}), ok),
              {"dropout_train", "step is 1xi64", "expected i64"});
  expectError(sig("dropout_train", {D(i64, {4}), D(i64, {})}, D(i64, {4}), ok),
              {"dropout_train", "input", "i64"});
  expectError(sig("dropout_train", {D(f32, {4})}, D(f32, {4}), ok),
              {"dropout_train", "expects 2 to 3 inputs, got 1"});
  expectError(sig("dropout_train", {D(f32, {4}), D(i64, {})}, D(f32, {5}), ok),
              {"dropout_train", "output is 5xf32"});
  for (double bad : {0.0, 1.0, -0.5})
    expectError(sig("dropout_train", {D(f32, {4}), D(i64, {})}, D(f32, {4}),
                    attrs({{"p", F(bad)}, {"seed", I(0)}, {"stream", I(0)}})),
                {"dropout_train", "p must be in (0, 1)"});
  expectError(sig("dropout_train", {D(f32, {4}), D(i64, {})}, D(f32, {4}),
                  attrs({{"p", F(0.1)}, {"seed", I(-1)}, {"stream", I(0)}})),
              {"dropout_train", "seed must be >= 0"});
  expectError(sig("dropout_train", {D(f32, {4}), D(i64, {})}, D(f32, {4}),
                  attrs({{"p", F(0.1)}, {"seed", I(0)}})),
              {"dropout_train", "missing attribute 'stream'"});
}

/// batch_norm_train in double: y, mean, biased var.
void refBatchNormTrain(const std::vector<double> &x, const Shape &shape, const double *w,
                       const double *b, double eps, std::vector<double> *y,
                       std::vector<double> *mean, std::vector<double> *var) {
  int64_t n = shape[0], c = shape[1], inner = numElements(shape) / (n * c);
  mean->assign(c, 0);
  var->assign(c, 0);
  y->assign(x.size(), 0);
  double count = static_cast<double>(n * inner);
  for (int64_t k = 0; k < c; ++k) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < inner; ++j)
        (*mean)[k] += x[(i * c + k) * inner + j];
    (*mean)[k] /= count;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        double d = x[(i * c + k) * inner + j] - (*mean)[k];
        (*var)[k] += d * d;
      }
    (*var)[k] /= count;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        int64_t at = (i * c + k) * inner + j;
        (*y)[at] = (x[at] - (*mean)[k]) / std::sqrt((*var)[k] + eps) * (w ? w[k] : 1) +
                   (b ? b[k] : 0);
      }
  }
}

TEST_P(KernelTest, BatchNormTrainUsesBatchStatistics) {
  REQUIRE_KERNEL("batch_norm_train");
  for (const Shape &shape : {Shape{2, 3, 4, 5}, Shape{6, 4}, Shape{8, 16, 20, 20}}) {
    int64_t c = shape[1];
    HostTensor x = random(shape, -3, 5), w = random({c}), b = random({c});
    std::vector<double> wv = w.values(), bv = b.values();
    for (int affine = 0; affine < 4; ++affine) {
      const HostTensor *wp = affine & 1 ? &w : nullptr, *bp = affine & 2 ? &b : nullptr;
      std::vector<HostTensor> outs = {garbage(shape), garbage({c}), garbage({c})};
      ASSERT_OK(runOutputs(*backend, "batch_norm_train", {&x, wp, bp}, &outs,
                           attrs({{"eps", F(1e-5)}})));
      std::vector<double> y, mean, var;
      refBatchNormTrain(x.values(), shape, wp ? wv.data() : nullptr, bp ? bv.data() : nullptr,
                        1e-5, &y, &mean, &var);
      std::string what = "batch_norm_train " + describe(shape, f32) + " affine " +
                         std::to_string(affine);
      expectClose(outs[0], y, 1e-5, 1e-5, what + " y");
      expectClose(outs[1], mean, 1e-6, 1e-6, what + " mean");
      expectClose(outs[2], var, 1e-6, 1e-6, what + " var");
    }
  }
  // A small spread far from zero: the variance (about 8e-6) stays right to
  // 1e-6 of itself only if the deviations are taken from a mean, not from 0.
  // (y is x·a + b in f32, as PyTorch's CPU kernel: not checked this close.)
  {
    const Shape shape{4, 3, 9, 7};
    HostTensor x = random(shape, 1000, 1000.01);
    std::vector<HostTensor> outs = {garbage(shape), garbage({3}), garbage({3})};
    ASSERT_OK(runOutputs(*backend, "batch_norm_train", {&x, nullptr, nullptr}, &outs,
                         attrs({{"eps", F(1e-5)}})));
    std::vector<double> y, mean, var;
    refBatchNormTrain(x.values(), shape, nullptr, nullptr, 1e-5, &y, &mean, &var);
    expectClose(outs[1], mean, 0, 1e-7, "batch_norm_train offset mean");
    expectClose(outs[2], var, 0, 1e-6, "batch_norm_train offset var");
  }
  Attributes a = attrs({{"eps", F(1e-5)}});
  auto bn = [&](std::vector<std::optional<TensorDesc>> in, std::vector<TensorDesc> out,
                Attributes at) { return sigN("batch_norm_train", std::move(in), std::move(out), at); };
  TensorDesc x = D(f32, {2, 3, 4}), c = D(f32, {3});
  expectError(bn({x, std::nullopt, std::nullopt}, {x, c}, a),
              {"batch_norm_train", "expects 3 outputs, got 2"});
  expectError(bn({x}, {x, c, c}, a), {"batch_norm_train", "expects 3 inputs, got 1"});
  expectError(bn({D(f32, {2}), std::nullopt, std::nullopt}, {D(f32, {2}), c, c}, a),
              {"batch_norm_train", "[N, C, ...]"});
  expectError(bn({x, D(f32, {4}), std::nullopt}, {x, c, c}, a),
              {"batch_norm_train", "weight is 4xf32", "expected 3xf32"});
  expectError(bn({x, std::nullopt, D(i64, {3})}, {x, c, c}, a), {"batch_norm_train", "bias", "i64"});
  expectError(bn({x, std::nullopt, std::nullopt}, {x, D(f32, {4}), c}, a),
              {"batch_norm_train", "mean", "4xf32"});
  expectError(bn({x, std::nullopt, std::nullopt}, {D(f32, {2, 3, 5}), c, c}, a),
              {"batch_norm_train", "y", "2x3x5xf32"});
  expectError(bn({D(f32, {1, 3, 1}), std::nullopt, std::nullopt}, {D(f32, {1, 3, 1}), c, c}, a),
              {"batch_norm_train", "more than one value per channel"});
  expectError(bn({x, std::nullopt, std::nullopt}, {x, c, c}, {}),
              {"batch_norm_train", "missing attribute 'eps'"});
}

TEST_P(KernelTest, UpdateRunningStatsBlendsInDouble) {
  REQUIRE_KERNEL("update_running_stats");
  HostTensor mean = random({70}), var = random({70}, 0, 3);
  std::vector<HostTensor> running = {random({70}), random({70}, 0, 3)};
  std::vector<double> rm = running[0].values(), rv = running[1].values();
  ASSERT_OK(runOutputs(*backend, "update_running_stats", {&mean, &var}, &running,
                       attrs({{"momentum", F(0.1)}, {"count", I(32)}})));
  std::vector<double> wantM(70), wantV(70);
  for (int i = 0; i < 70; ++i) {
    wantM[i] = static_cast<float>(0.1 * mean.at(i) + 0.9 * rm[i]);
    wantV[i] = static_cast<float>(0.1 * var.at(i) * 32 / 31 + 0.9 * rv[i]);
  }
  expectClose(running[0], wantM, 0, 1e-7, "running_mean");
  expectClose(running[1], wantV, 0, 1e-7, "running_var");

  Attributes a = attrs({{"momentum", F(0.1)}, {"count", I(8)}});
  TensorDesc c = D(f32, {4});
  expectError(sigN("update_running_stats", {c, c}, {c}, a),
              {"update_running_stats", "expects 2 outputs, got 1"});
  expectError(sigN("update_running_stats", {c, D(f32, {5})}, {c, c}, a),
              {"update_running_stats", "var is 5xf32"});
  expectError(sigN("update_running_stats", {c, c}, {c, D(f32, {3})}, a),
              {"update_running_stats", "running_var is 3xf32"});
  expectError(sigN("update_running_stats", {D(f32, {2, 2}), D(f32, {2, 2})},
                   {D(f32, {2, 2}), D(f32, {2, 2})}, a),
              {"update_running_stats", "1-D"});
  expectError(sigN("update_running_stats", {c, c}, {c, c},
                   attrs({{"momentum", F(1.5)}, {"count", I(8)}})),
              {"update_running_stats", "momentum must be in [0, 1]"});
  expectError(sigN("update_running_stats", {c, c}, {c, c},
                   attrs({{"momentum", F(0.1)}, {"count", I(1)}})),
              {"update_running_stats", "count must be > 1"});
  expectError(sigN("update_running_stats", {D(bf16, {4}), D(bf16, {4})},
                   {D(bf16, {4}), D(bf16, {4})}, a),
              {"update_running_stats", "bf16"});
}

TEST_P(KernelTest, BatchNormBackwardMatchesFiniteDifferences) {
  REQUIRE_KERNEL("batch_norm_backward");
  const double eps = 1e-5;
  for (const Shape &shape : {Shape{2, 3, 2, 3}, Shape{5, 4}}) {
    const int64_t c = shape[1];
    HostTensor x = random(shape, -2, 3), g = random(shape), w = random({c}, 0.5, 2);
    std::vector<double> xv = x.values(), gv = g.values(), wv = w.values(), y, mean, var;
    refBatchNormTrain(xv, shape, nullptr, nullptr, eps, &y, &mean, &var);
    HostTensor meanT = make(f32, {c}, mean), varT = make(f32, {c}, var);
    for (bool withWeight : {false, true}) {
      std::vector<HostTensor> outs = {garbage(shape), garbage({c}), garbage({c})};
      std::vector<const HostTensor *> in = {&g, &x, &meanT, &varT};
      if (withWeight)
        in.push_back(&w);
      ASSERT_OK(runOutputs(*backend, "batch_norm_backward", in, &outs, attrs({{"eps", F(eps)}})));
      const double *wp = withWeight ? wv.data() : nullptr;
      // L = Σ g·y of the training-mode batch norm, as a function of x, w, b.
      auto lossOfX = [&](const std::vector<double> &xs) {
        std::vector<double> yy, m, v;
        refBatchNormTrain(xs, shape, wp, nullptr, eps, &yy, &m, &v);
        return dot(gv, yy);
      };
      std::vector<double> ones(c, 1.0), zeros(c, 0.0);
      auto lossOfW = [&](const std::vector<double> &ws) {
        std::vector<double> yy, m, v;
        refBatchNormTrain(xv, shape, ws.data(), nullptr, eps, &yy, &m, &v);
        return dot(gv, yy);
      };
      auto lossOfB = [&](const std::vector<double> &bs) {
        std::vector<double> yy, m, v;
        refBatchNormTrain(xv, shape, wp, bs.data(), eps, &yy, &m, &v);
        return dot(gv, yy);
      };
      std::string what = "batch_norm_backward " + describe(shape, f32) +
                         (withWeight ? " weight" : "");
      expectClose(outs[0], numericGradient(xv, lossOfX), 2e-4, 1e-3, what + " dx");
      // dweight is Σ g·x̂ whatever the weight (the gradient at w = 1 without one).
      expectClose(outs[1], numericGradient(ones, lossOfW), 2e-4, 1e-3, what + " dweight");
      expectClose(outs[2], numericGradient(zeros, lossOfB), 2e-4, 1e-3, what + " dbias");
    }
  }
  // A large one against the contract's formula, threaded.
  {
    Shape shape = {16, 8, 24, 24};
    HostTensor x = random(shape), g = random(shape), w = random({8});
    std::vector<double> y, mean, var;
    refBatchNormTrain(x.values(), shape, nullptr, nullptr, 1e-5, &y, &mean, &var);
    HostTensor meanT = make(f32, {8}, mean), varT = make(f32, {8}, var);
    std::vector<HostTensor> outs = {garbage(shape), garbage({8}), garbage({8})};
    ASSERT_OK(runOutputs(*backend, "batch_norm_backward", {&g, &x, &meanT, &varT, &w}, &outs,
                         attrs({{"eps", F(1e-5)}})));
    int64_t inner = 24 * 24, n = 16 * inner;
    std::vector<double> db(8, 0), dw(8, 0), dx(x.numel());
    auto xhat = [&](int64_t at, int64_t k) {
      return (x.at(at) - meanT.at(k)) / std::sqrt(varT.at(k) + 1e-5);
    };
    for (int64_t at = 0; at < x.numel(); ++at) {
      int64_t k = (at / inner) % 8;
      db[k] += g.at(at);
      dw[k] += g.at(at) * xhat(at, k);
    }
    for (int64_t at = 0; at < x.numel(); ++at) {
      int64_t k = (at / inner) % 8;
      dx[at] = w.at(k) / std::sqrt(varT.at(k) + 1e-5) *
               (g.at(at) - db[k] / n - xhat(at, k) * dw[k] / n);
    }
    expectClose(outs[0], dx, 1e-5, 1e-4, "large dx");
    expectClose(outs[1], dw, 1e-3, 1e-5, "large dweight");
    expectClose(outs[2], db, 1e-3, 1e-5, "large dbias");
  }
  Attributes a = attrs({{"eps", F(1e-5)}});
  TensorDesc x = D(f32, {2, 3, 4}), c = D(f32, {3});
  expectError(sigN("batch_norm_backward", {x, x, c}, {x, c, c}, a),
              {"batch_norm_backward", "expects 4 to 5 inputs, got 3"});
  expectError(sigN("batch_norm_backward", {x, x, c, c}, {x, c}, a),
              {"batch_norm_backward", "expects 3 outputs, got 2"});
  expectError(sigN("batch_norm_backward", {D(f32, {2, 3, 5}), x, c, c}, {x, c, c}, a),
              {"batch_norm_backward", "grad is 2x3x5xf32"});
  expectError(sigN("batch_norm_backward", {x, x, D(f32, {4}), c}, {x, c, c}, a),
              {"batch_norm_backward", "mean is 4xf32"});
  expectError(sigN("batch_norm_backward", {x, x, c, c, D(f32, {2})}, {x, c, c}, a),
              {"batch_norm_backward", "weight is 2xf32"});
  expectError(sigN("batch_norm_backward", {x, x, c, c}, {x, c, D(f32, {1})}, a),
              {"batch_norm_backward", "grad_bias"});
  expectError(sigN("batch_norm_backward", {x, x, c, D(i64, {3})}, {x, c, c}, a),
              {"batch_norm_backward", "var", "i64"});
}

TEST_P(KernelTest, NllLossReductionsAndIgnoredRows) {
  REQUIRE_KERNEL("nll_loss");
  HostTensor logp = random({6, 5}, -4, 0);
  for (DType tt : {i64, i32}) {
    HostTensor target = make(tt, {6}, {0, 4, -100, 2, 3, -100});
    double sum = 0;
    std::vector<double> none(6, 0.0);
    for (int i = 0; i < 6; ++i) {
      int64_t t = static_cast<int64_t>(target.at(i));
      if (t != -100) {
        none[i] = -logp.at(i * 5 + t);
        sum += none[i];
      }
    }
    HostTensor out;
    ASSERT_OK(run("nll_loss", {&logp, &target}, D(f32, {}), &out,
                  attrs({{"reduction", S("mean")}, {"ignore_index", I(-100)}})));
    expectClose(out, {sum / 4}, 1e-6, 1e-6, "mean");
    ASSERT_OK(run("nll_loss", {&logp, &target}, D(f32, {}), &out));  // defaults: mean, -100
    expectClose(out, {sum / 4}, 1e-6, 1e-6, "default");
    ASSERT_OK(run("nll_loss", {&logp, &target}, D(f32, {}), &out,
                  attrs({{"reduction", S("sum")}, {"ignore_index", I(-100)}})));
    expectClose(out, {sum}, 1e-6, 1e-6, "sum");
    ASSERT_OK(run("nll_loss", {&logp, &target}, D(f32, {6}), &out,
                  attrs({{"reduction", S("none")}, {"ignore_index", I(-100)}})));
    expectEqual(out, none, "none");
  }
  // Every row ignored: the mean is NaN, the sum 0.
  HostTensor ignored = make(i64, {6}, std::vector<double>(6, 3)), out;
  ASSERT_OK(run("nll_loss", {&logp, &ignored}, D(f32, {}), &out,
                attrs({{"reduction", S("mean")}, {"ignore_index", I(3)}})));
  EXPECT_TRUE(std::isnan(out.at(0)));
  ASSERT_OK(run("nll_loss", {&logp, &ignored}, D(f32, {}), &out,
                attrs({{"reduction", S("sum")}, {"ignore_index", I(3)}})));
  EXPECT_EQ(out.at(0), 0.0);
  // A target out of range is an error naming the row.
  for (double bad : {5.0, -1.0}) {
    HostTensor target = make(i64, {6}, {0, 1, 2, bad, 1, 1});
    Status status = run("nll_loss", {&logp, &target}, D(f32, {}), &out);
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find("nll_loss"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("row 3"), std::string::npos) << status.message();
  }

  Attributes a = attrs({{"reduction", S("mean")}, {"ignore_index", I(-100)}});
  expectError(sig("nll_loss", {D(f32, {6}), D(i64, {6})}, D(f32, {}), a), {"nll_loss", "[N, C]"});
  expectError(sig("nll_loss", {D(f32, {6, 5}), D(i64, {5})}, D(f32, {}), a),
              {"nll_loss", "target is 5xi64", "[6]"});
  expectError(sig("nll_loss", {D(f32, {6, 5}), D(f32, {6})}, D(f32, {}), a),
              {"nll_loss", "target", "f32"});
  expectError(sig("nll_loss", {D(f32, {6, 5}), D(i64, {6})}, D(f32, {6}), a),
              {"nll_loss", "output is 6xf32"});
  expectError(sig("nll_loss", {D(f32, {6, 5}), D(i64, {6})}, D(f32, {}),
                  attrs({{"reduction", S("max")}})),
              {"nll_loss", "reduction must be mean, sum or none", "max"});
  expectError(sig("nll_loss", {D(f32, {6, 5})}, D(f32, {}), a), {"nll_loss", "expects 2 inputs"});
}

TEST_P(KernelTest, NllLossBackwardScattersTheGradient) {
  REQUIRE_KERNEL("nll_loss_backward");
  HostTensor target = make(i32, {5}, {1, -100, 0, 2, 2});
  const double g0 = 1.5;
  for (const char *reduction : {"mean", "sum", "none"}) {
    bool none = std::string(reduction) == "none";
    HostTensor g = none ? random({5}) : make(f32, {}, {g0}), dx;
    ASSERT_OK(run("nll_loss_backward", {&g, &target}, D(f32, {5, 3}), &dx,
                  attrs({{"reduction", S(reduction)}, {"ignore_index", I(-100)}})));
    std::vector<double> want(15, 0.0);
    for (int i = 0; i < 5; ++i) {
      int64_t t = static_cast<int64_t>(target.at(i));
      if (t == -100)
        continue;
      want[i * 3 + t] = none ? -g.at(i) : std::string(reduction) == "mean"
                                              ? static_cast<double>(-static_cast<float>(g0) / 4.0f)
                                              : -g0;
    }
    expectEqual(dx, want, std::string("nll_loss_backward ") + reduction);
  }
  // Large, threaded zeroing.
  HostTensor bigTarget = randomInts(i64, {700}, 0, 99), g = make(f32, {}, {2.0}), dx;
  ASSERT_OK(run("nll_loss_backward", {&g, &bigTarget}, D(f32, {700, 100}), &dx,
                attrs({{"reduction", S("sum")}, {"ignore_index", I(-100)}})));
  std::vector<double> want(70000, 0.0);
  for (int i = 0; i < 700; ++i)
    want[i * 100 + static_cast<int64_t>(bigTarget.at(i))] = -2.0;
  expectEqual(dx, want, "large");
  HostTensor bad = make(i64, {5}, {1, 0, 0, 7, 0});
  HostTensor one = make(f32, {}, {1.0});
  Status status = run("nll_loss_backward", {&one, &bad}, D(f32, {5, 3}), &dx);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("row 3"), std::string::npos) << status.message();

  Attributes a = attrs({{"reduction", S("none")}, {"ignore_index", I(-100)}});
  expectError(sig("nll_loss_backward", {D(f32, {}), D(i64, {5})}, D(f32, {5, 3}), a),
              {"nll_loss_backward", "grad is f32", "5xf32"});
  expectError(sig("nll_loss_backward", {D(f32, {5}), D(i64, {4})}, D(f32, {5, 3}), a),
              {"nll_loss_backward", "target is 4xi64"});
  expectError(sig("nll_loss_backward", {D(f32, {5}), D(i64, {5})}, D(f32, {15}), a),
              {"nll_loss_backward", "[N, C]"});
}

/// softmax (or log_softmax) of `x` along `dim` in double.
std::vector<double> refSoftmax(const std::vector<double> &x, const Shape &shape, int64_t dim,
                               bool log) {
  int64_t d = shape[dim], inner = 1;
  for (size_t k = dim + 1; k < shape.size(); ++k)
    inner *= shape[k];
  int64_t outer = static_cast<int64_t>(x.size()) / (d * inner);
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double mx = -kInf, s = 0;
      for (int64_t r = 0; r < d; ++r)
        mx = std::max(mx, x[(o * d + r) * inner + j]);
      for (int64_t r = 0; r < d; ++r)
        s += std::exp(x[(o * d + r) * inner + j] - mx);
      for (int64_t r = 0; r < d; ++r) {
        int64_t at = (o * d + r) * inner + j;
        y[at] = log ? x[at] - mx - std::log(s) : std::exp(x[at] - mx) / s;
      }
    }
  return y;
}

TEST_P(KernelTest, SoftmaxBackwardsMatchFiniteDifferences) {
  REQUIRE_KERNEL("softmax_backward");
  struct Case { Shape shape; int64_t dim; };
  for (const Case &c : {Case{{3, 7}, 1}, Case{{4, 5, 3}, 1}, Case{{4, 5, 3}, 0}}) {
    for (bool log : {false, true}) {
      const char *kernel = log ? "log_softmax_backward" : "softmax_backward";
      HostTensor x = random(c.shape), g = random(c.shape);
      std::vector<double> xv = x.values(), gv = g.values();
      HostTensor y = make(f32, c.shape, refSoftmax(xv, c.shape, c.dim, log)), dx;
      ASSERT_OK(run(kernel, {&g, &y}, y.desc, &dx, attrs({{"dim", I(c.dim)}})));
      auto loss = [&](const std::vector<double> &xs) {
        return dot(gv, refSoftmax(xs, c.shape, c.dim, log));
      };
      expectClose(dx, numericGradient(xv, loss, 1e-5), 1e-5, 1e-4,
                  std::string(kernel) + " " + describe(c.shape, f32) + " dim " +
                      std::to_string(c.dim));
    }
  }
  // Large rows and columns (threaded) against the contract's formulas.
  for (const Case &c : {Case{{300, 200}, 1}, Case{{20, 64, 300}, 1}}) {
    for (bool log : {false, true}) {
      const char *kernel = log ? "log_softmax_backward" : "softmax_backward";
      HostTensor x = random(c.shape), g = random(c.shape);
      HostTensor y = make(f32, c.shape, refSoftmax(x.values(), c.shape, c.dim, log)), dx;
      ASSERT_OK(run(kernel, {&g, &y}, y.desc, &dx, attrs({{"dim", I(c.dim)}})));
      int64_t d = c.shape[c.dim], inner = c.dim == 1 && c.shape.size() == 3 ? c.shape[2] : 1;
      int64_t outer = x.numel() / (d * inner);
      std::vector<double> want(x.numel());
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j) {
          double s = 0;
          for (int64_t r = 0; r < d; ++r) {
            int64_t at = (o * d + r) * inner + j;
            s += log ? g.at(at) : g.at(at) * y.at(at);
          }
          for (int64_t r = 0; r < d; ++r) {
            int64_t at = (o * d + r) * inner + j;
            want[at] = log ? g.at(at) - std::exp(y.at(at)) * s : y.at(at) * (g.at(at) - s);
          }
        }
      expectClose(dx, want, 2e-5, 1e-4, std::string(kernel) + " large");
    }
  }
  for (const char *kernel : {"softmax_backward", "log_softmax_backward"}) {
    Attributes a = attrs({{"dim", I(1)}});
    expectError(sig(kernel, {D(f32, {2, 3}), D(f32, {2, 4})}, D(f32, {2, 4}), a),
                {kernel, "grad is 2x3xf32"});
    expectError(sig(kernel, {D(f32, {2, 3}), D(f32, {2, 3})}, D(f32, {2, 3}),
                    attrs({{"dim", I(2)}})),
                {kernel, "dim 2 is out of range for rank 2"});
    expectError(sig(kernel, {D(f32, {2, 3})}, D(f32, {2, 3}), a), {kernel, "expects 2 inputs"});
    expectError(sig(kernel, {D(f32, {2, 3}), D(f32, {2, 3})}, D(f32, {3, 2}), a),
                {kernel, "output is 3x2xf32"});
    expectError(sig(kernel, {D(f32, {2, 3}), D(f32, {2, 3})}, D(f32, {2, 3})),
                {kernel, "missing attribute 'dim'"});
  }
}

/// layer_norm in double over rows of d.
std::vector<double> refLayerNorm(const std::vector<double> &x, int64_t d, const double *w,
                                 const double *b, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i)
      mean += x[r * d + i];
    mean /= d;
    for (int64_t i = 0; i < d; ++i)
      var += (x[r * d + i] - mean) * (x[r * d + i] - mean);
    var /= d;
    for (int64_t i = 0; i < d; ++i)
      y[r * d + i] = (x[r * d + i] - mean) / std::sqrt(var + eps) * (w ? w[i] : 1) + (b ? b[i] : 0);
  }
  return y;
}

TEST_P(KernelTest, LayerNormBackwardMatchesFiniteDifferences) {
  REQUIRE_KERNEL("layer_norm_backward");
  const double eps = 1e-5;
  struct Case { Shape x; Ints normalized; };
  for (const Case &c : {Case{{3, 8}, {8}}, Case{{2, 3, 2, 3}, {2, 3}}}) {
    const int64_t d = numElements(c.normalized);
    HostTensor x = random(c.x), g = random(c.x), w = random(c.normalized, 0.5, 2);
    std::vector<double> xv = x.values(), gv = g.values(), wv = w.values();
    for (bool withWeight : {false, true}) {
      std::vector<HostTensor> outs = {garbage(c.x), garbage(c.normalized), garbage(c.normalized)};
      std::vector<const HostTensor *> in = {&g, &x};
      if (withWeight)
        in.push_back(&w);
      ASSERT_OK(runOutputs(*backend, "layer_norm_backward", in, &outs,
                           attrs({{"normalized_shape", L(c.normalized)}, {"eps", F(eps)}})));
      const double *wp = withWeight ? wv.data() : nullptr;
      std::vector<double> ones(d, 1.0), zeros(d, 0.0);
      auto lossOfX = [&](const std::vector<double> &xs) {
        return dot(gv, refLayerNorm(xs, d, wp, nullptr, eps));
      };
      auto lossOfW = [&](const std::vector<double> &ws) {
        return dot(gv, refLayerNorm(xv, d, ws.data(), nullptr, eps));
      };
      auto lossOfB = [&](const std::vector<double> &bs) {
        return dot(gv, refLayerNorm(xv, d, wp, bs.data(), eps));
      };
      std::string what = "layer_norm_backward " + describe(c.x, f32) +
                         (withWeight ? " weight" : "");
      expectClose(outs[0], numericGradient(xv, lossOfX), 2e-4, 1e-3, what + " dx");
      expectClose(outs[1], numericGradient(ones, lossOfW), 2e-4, 1e-3, what + " dweight");
      expectClose(outs[2], numericGradient(zeros, lossOfB), 2e-4, 1e-3, what + " dbias");
    }
  }
  // Many rows (threaded, several blocks) against the contract's formula.
  {
    const int64_t rows = 1000, d = 96;
    HostTensor x = random({rows, d}, -3, 3), g = random({rows, d}), w = random({d});
    std::vector<HostTensor> outs = {garbage({rows, d}), garbage({d}), garbage({d})};
    ASSERT_OK(runOutputs(*backend, "layer_norm_backward", {&g, &x, &w}, &outs,
                         attrs({{"normalized_shape", L({d})}, {"eps", F(1e-5)}})));
    std::vector<double> dx(rows * d), dw(d, 0), db(d, 0);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < d; ++i)
        mean += x.at(r * d + i);
      mean /= d;
      for (int64_t i = 0; i < d; ++i)
        var += (x.at(r * d + i) - mean) * (x.at(r * d + i) - mean);
      double rstd = 1 / std::sqrt(var / d + 1e-5), mg = 0, mgx = 0;
      for (int64_t i = 0; i < d; ++i) {
        double xhat = (x.at(r * d + i) - mean) * rstd, gh = g.at(r * d + i) * w.at(i);
        mg += gh / d;
        mgx += gh * xhat / d;
        dw[i] += g.at(r * d + i) * xhat;
        db[i] += g.at(r * d + i);
      }
      for (int64_t i = 0; i < d; ++i) {
        double xhat = (x.at(r * d + i) - mean) * rstd;
        dx[r * d + i] = rstd * (g.at(r * d + i) * w.at(i) - mg - xhat * mgx);
      }
    }
    expectClose(outs[0], dx, 1e-4, 1e-4, "large dx");
    expectClose(outs[1], dw, 1e-3, 1e-5, "large dweight");
    expectClose(outs[2], db, 1e-3, 1e-5, "large dbias");
  }
  Attributes a = attrs({{"normalized_shape", L({4})}, {"eps", F(1e-5)}});
  TensorDesc x = D(f32, {2, 4}), c = D(f32, {4});
  expectError(sigN("layer_norm_backward", {x, x}, {x}, a),
              {"layer_norm_backward", "expects 3 outputs, got 1"});
  expectError(sigN("layer_norm_backward", {x}, {x, c, c}, a),
              {"layer_norm_backward", "expects 2 to 3 inputs, got 1"});
  expectError(sigN("layer_norm_backward", {D(f32, {2, 5}), x}, {x, c, c}, a),
              {"layer_norm_backward", "grad is 2x5xf32"});
  expectError(sigN("layer_norm_backward", {x, x, D(f32, {5})}, {x, c, c}, a),
              {"layer_norm_backward", "weight is 5xf32"});
  expectError(sigN("layer_norm_backward", {x, x}, {x, c, D(f32, {2})}, a),
              {"layer_norm_backward", "grad_bias) is 2xf32"});
  expectError(sigN("layer_norm_backward", {x, x}, {x, c, c},
                   attrs({{"normalized_shape", L({3})}, {"eps", F(1e-5)}})),
              {"layer_norm_backward", "normalized_shape [3]", "trailing dims"});
  expectError(sigN("layer_norm_backward", {x, x}, {x, c, c}, attrs({{"normalized_shape", L({4})}})),
              {"layer_norm_backward", "missing attribute 'eps'"});
}

TEST_P(KernelTest, ActivationBackwardsMatchDerivatives) {
  REQUIRE_KERNEL("gelu_backward");
  struct Case {
    const char *kernel;
    std::function<double(double)> f;
    Attributes attrs;
  };
  std::vector<Case> cases = {
      {"gelu_backward", refGeluErf, {}},
      {"gelu_backward", refGeluErf, attrs({{"approximation", S("none")}})},
      {"gelu_backward", refGeluTanh, attrs({{"approximation", S("tanh")}})},
      {"silu_backward", [](double x) { return x / (1 + std::exp(-x)); }, {}},
  };
  for (const Shape &shape : {Shape{3, 7, 5}, Shape{}, Shape{257, 131}}) {
    for (const Case &c : cases) {
      HostTensor x = random(shape, -8, 8), g = random(shape), dx;
      ASSERT_OK(run(c.kernel, {&g, &x}, x.desc, &dx, c.attrs));
      std::vector<double> want(x.numel());
      for (int64_t i = 0; i < x.numel(); ++i) {
        double v = x.at(i), h = 1e-5;
        want[i] = g.at(i) * (c.f(v + h) - c.f(v - h)) / (2 * h);
      }
      expectClose(dx, want, 1e-5, 1e-5, c.kernel);
    }
  }
  for (const char *kernel : {"gelu_backward", "silu_backward"}) {
    expectError(sig(kernel, {D(f32, {2, 3}), D(f32, {3, 2})}, D(f32, {3, 2})),
                {kernel, "grad is 2x3xf32"});
    expectError(sig(kernel, {D(f32, {2})}, D(f32, {2})), {kernel, "expects 2 inputs"});
    expectError(sig(kernel, {D(i32, {2}), D(i32, {2})}, D(i32, {2})), {kernel, "i32"});
    expectError(sig(kernel, {D(f32, {2}), D(f32, {2})}, D(f32, {3})), {kernel, "output is 3xf32"});
  }
  expectError(sig("gelu_backward", {D(f32, {2}), D(f32, {2})}, D(f32, {2}),
                  attrs({{"approximation", S("erf")}})),
              {"gelu_backward", "approximation 'erf'"});
}

TEST_P(KernelTest, ReluBackwardPassesTheGradientWhereTheOutputIsPositive) {
  REQUIRE_KERNEL("relu_backward");
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // The edges: y = 0 and -0 stop the gradient, a NaN y too (threshold_backward
  // compares y > 0); an infinite or NaN gradient passes only where y > 0, so a
  // multiply by the mask would be wrong where it is stopped.
  HostTensor y = make(f32, {8}, {1.5, 0, -0.0, -2, nan, 1e-30, inf, -inf});
  HostTensor g = make(f32, {8}, {3, inf, nan, -inf, 4, -5, nan, 7});
  HostTensor dx;
  ASSERT_OK(run("relu_backward", {&g, &y}, y.desc, &dx));
  expectClose(dx, {3, 0, 0, 0, 0, -5, nan, 0}, 0, 0, "relu_backward");
  // Sizes across the vector width and the threads' split, and an empty one.
  for (const Shape &shape : {Shape{257, 131}, Shape{3, 0}, Shape{}}) {
    HostTensor yy = random(shape, -1, 1), gg = random(shape), out;
    ASSERT_OK(run("relu_backward", {&gg, &yy}, yy.desc, &out));
    std::vector<double> expected(yy.numel());
    for (int64_t i = 0; i < yy.numel(); ++i)
      expected[i] = yy.at(i) > 0 ? gg.at(i) : 0.0;
    expectClose(out, expected, 0, 0, "relu_backward");
  }
  expectError(sig("relu_backward", {D(f32, {2, 3}), D(f32, {3, 2})}, D(f32, {3, 2})),
              {"relu_backward", "grad is 2x3xf32", "the output's shape"});
  expectError(sig("relu_backward", {D(f32, {2})}, D(f32, {2})),
              {"relu_backward", "expects 2 inputs"});
  expectError(sig("relu_backward", {D(i32, {2}), D(i32, {2})}, D(i32, {2})),
              {"relu_backward", "output", "i32"});
  expectError(sig("relu_backward", {D(f32, {2}), D(f32, {2})}, D(f32, {3})),
              {"relu_backward", "output is 3xf32", "same as the output"});
}

/// lr · λ(t − 1), docs/training.md.
double refSchedule(const std::string &kind, double lr, int64_t t, int64_t warmup, int64_t decay) {
  double s = static_cast<double>(t - 1);
  if (s < warmup)
    return lr * s / warmup;
  double span = std::max<double>(1, decay - warmup);
  if (kind == "linear")
    return lr * std::max(0.0, (decay - s) / span);
  if (kind == "cosine")
    return lr * std::max(0.0, 0.5 * (1 + std::cos(M_PI * std::min(1.0, (s - warmup) / span))));
  return lr;
}

Attributes adamwAttrs(double lr, double wd, const char *schedule = "constant", int64_t warmup = 0,
                      int64_t decay = 0, double beta1 = 0.9) {
  return attrs({{"lr", F(lr)}, {"beta1", F(beta1)}, {"beta2", F(0.999)}, {"eps", F(1e-8)},
                {"weight_decay", F(wd)}, {"schedule", S(schedule)}, {"warmup_steps", I(warmup)},
                {"decay_steps", I(decay)}});
}

TEST_P(KernelTest, AdamWFollowsTorchSingleTensor) {
  REQUIRE_KERNEL("adamw");
  struct Case { double lr, wd, beta1; const char *schedule; int64_t warmup, decay; bool scaled; };
  for (const Case &c : {Case{1e-3, 1e-2, 0.9, "constant", 0, 0, false},
                        Case{3e-2, 0.1, 0.3, "cosine", 2, 6, true},
                        Case{1e-2, 0.0, 0.9, "linear", 1, 4, false}}) {
    const Shape shape = {37, 29};
    HostTensor param = random(shape);
    std::vector<HostTensor> state = {param, make(f32, shape, std::vector<double>(37 * 29, 0)),
                                     make(f32, shape, std::vector<double>(37 * 29, 0))};
    // The reference: torch.optim.AdamW's single-tensor ops, each rounded to f32.
    std::vector<float> p(param.as<float>(), param.as<float>() + param.numel());
    std::vector<float> m(p.size(), 0.0f), v(p.size(), 0.0f);
    for (int64_t t = 1; t <= 6; ++t) {
      HostTensor grad = random(shape), step = stepTensor(t), scale = make(f32, {}, {0.7});
      std::vector<const HostTensor *> in = {&grad, &step};
      if (c.scaled)
        in.push_back(&scale);
      ASSERT_OK(runOutputs(*backend, "adamw", in, &state,
                           adamwAttrs(c.lr, c.wd, c.schedule, c.warmup, c.decay, c.beta1)));
      double lr = refSchedule(c.schedule, c.lr, t, c.warmup, c.decay);
      double bc1 = 1 - std::pow(c.beta1, t), bc2 = 1 - std::pow(0.999, t);
      float w = static_cast<float>(1 - c.beta1);
      for (size_t i = 0; i < p.size(); ++i) {
        float g = grad.as<float>()[i] * (c.scaled ? 0.7f : 1.0f);
        p[i] = p[i] * static_cast<float>(1 - lr * c.wd);
        m[i] = std::fabs(w) < 0.5f ? m[i] + w * (g - m[i]) : g - (g - m[i]) * (1.0f - w);
        v[i] = v[i] * 0.999f;
        v[i] = v[i] + static_cast<float>(1 - 0.999) * g * g;
        float denom = std::sqrt(v[i]) / static_cast<float>(std::sqrt(bc2)) + 1e-8f;
        p[i] = p[i] + static_cast<float>(-(lr / bc1)) * m[i] / denom;
      }
      std::string what = std::string("adamw ") + c.schedule + " t=" + std::to_string(t);
      expectClose(state[0], std::vector<double>(p.begin(), p.end()), 1e-6, 1e-6, what + " param");
      expectClose(state[1], std::vector<double>(m.begin(), m.end()), 1e-7, 1e-6, what + " exp_avg");
      expectClose(state[2], std::vector<double>(v.begin(), v.end()), 1e-9, 1e-6,
                  what + " exp_avg_sq");
    }
  }
  // Large (threaded): one step of the plain formulas (docs/training.md) in double.
  {
    const Shape shape = {512, 300};
    HostTensor param = random(shape), grad = random(shape), step = stepTensor(1);
    std::vector<HostTensor> state = {param, make(f32, shape, std::vector<double>(param.numel(), 0)),
                                     make(f32, shape, std::vector<double>(param.numel(), 0))};
    ASSERT_OK(runOutputs(*backend, "adamw", {&grad, &step}, &state, adamwAttrs(1e-3, 1e-2)));
    std::vector<double> want(param.numel());
    for (int64_t i = 0; i < param.numel(); ++i) {
      double g = grad.at(i), m = 0.1 * g, v = 0.001 * g * g;
      double p = param.at(i) * (1 - 1e-5);
      want[i] = p - (1e-3 / 0.1) * m / (std::sqrt(v) / std::sqrt(0.001) + 1e-8);
    }
    expectClose(state[0], want, 1e-6, 1e-5, "adamw large");
  }
  // t < 1 is a run-time error.
  HostTensor grad = random({4}), zero = stepTensor(0);
  std::vector<HostTensor> state = {random({4}), random({4}), random({4})};
  Status status = runOutputs(*backend, "adamw", {&grad, &zero}, &state, adamwAttrs(1e-3, 0));
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("adamw"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("step t = 0"), std::string::npos) << status.message();

  Attributes a = adamwAttrs(1e-3, 1e-2);
  TensorDesc p = D(f32, {4, 3}), s = D(i64, {});
  expectError(sigN("adamw", {p, s}, {p, p}, a), {"adamw", "expects 3 outputs, got 2"});
  expectError(sigN("adamw", {p}, {p, p, p}, a), {"adamw", "expects 2 to 3 inputs, got 1"});
  expectError(sigN("adamw", {D(f32, {3, 4}), s}, {p, p, p}, a), {"adamw", "grad is 3x4xf32"});
  expectError(sigN("adamw", {p, s}, {p, D(f32, {4}), p}, a), {"adamw", "exp_avg is 4xf32"});
  expectError(sigN("adamw", {p, D(f32, {})}, {p, p, p}, a), {"adamw", "step", "f32"});
  expectError(sigN("adamw", {p, s, D(f32, {1})}, {p, p, p}, a), {"adamw", "grad_scale is 1xf32"});
  expectError(sigN("adamw", {D(bf16, {4, 3}), s}, {D(bf16, {4, 3}), D(bf16, {4, 3}),
                                                    D(bf16, {4, 3})}, a),
              {"adamw", "bf16"});
  expectError(sigN("adamw", {p, s}, {p, p, p}, adamwAttrs(1e-3, 0, "step")),
              {"adamw", "schedule must be constant, linear or cosine", "'step'"});
  expectError(sigN("adamw", {p, s}, {p, p, p}, adamwAttrs(1e-3, 0, "cosine", 0, 0)),
              {"adamw", "cosine schedule needs decay_steps > 0"});
  expectError(sigN("adamw", {p, s}, {p, p, p}, adamwAttrs(1e-3, 0, "constant", 0, 0, 1.0)),
              {"adamw", "beta1 and beta2 must be in [0, 1)"});
  expectError(sigN("adamw", {p, s}, {p, p, p}, adamwAttrs(-1, 0)), {"adamw", "lr must be >= 0"});
  expectError(sigN("adamw", {p, s}, {p, p, p}, attrs({{"lr", F(1e-3)}})),
              {"adamw", "missing attribute"});
}

Attributes sgdAttrs(double lr, double momentum, double dampening, bool nesterov, double wd,
                    const char *schedule = "constant", int64_t warmup = 0, int64_t decay = 0) {
  return attrs({{"lr", F(lr)}, {"momentum", F(momentum)}, {"dampening", F(dampening)},
                {"nesterov", B(nesterov)}, {"weight_decay", F(wd)}, {"schedule", S(schedule)},
                {"warmup_steps", I(warmup)}, {"decay_steps", I(decay)}});
}

TEST_P(KernelTest, SgdFollowsTorchSingleTensor) {
  REQUIRE_KERNEL("sgd");
  struct Case { double momentum, dampening; bool nesterov; double wd; bool scaled; };
  for (const Case &c : {Case{0, 0, false, 0, false}, Case{0, 0, false, 1e-2, true},
                        Case{0.9, 0, false, 0, false}, Case{0.9, 0.1, false, 1e-3, true},
                        Case{0.8, 0, true, 1e-2, false}}) {
    const Shape shape = {301, 7};
    HostTensor param = random(shape);
    std::vector<HostTensor> state = {param};
    if (c.momentum != 0)
      state.push_back(random(shape)); // the buffer's value before t = 1 is never read
    std::vector<float> p(param.as<float>(), param.as<float>() + param.numel()), buf(p.size());
    for (int64_t t = 1; t <= 4; ++t) {
      HostTensor grad = random(shape), step = stepTensor(t), scale = make(f32, {}, {0.5});
      std::vector<const HostTensor *> in = {&grad, &step};
      if (c.scaled)
        in.push_back(&scale);
      ASSERT_OK(runOutputs(*backend, "sgd", in, &state,
                           sgdAttrs(0.1, c.momentum, c.dampening, c.nesterov, c.wd)));
      for (size_t i = 0; i < p.size(); ++i) {
        float d = grad.as<float>()[i] * (c.scaled ? 0.5f : 1.0f);
        if (c.wd != 0)
          d = d + static_cast<float>(c.wd) * p[i];
        if (c.momentum != 0) {
          buf[i] = t == 1 ? d
                          : buf[i] * static_cast<float>(c.momentum) +
                                static_cast<float>(1 - c.dampening) * d;
          d = c.nesterov ? d + static_cast<float>(c.momentum) * buf[i] : buf[i];
        }
        p[i] = p[i] + static_cast<float>(-0.1) * d;
      }
      std::string what = "sgd momentum " + std::to_string(c.momentum) + " t=" + std::to_string(t);
      expectClose(state[0], std::vector<double>(p.begin(), p.end()), 1e-6, 1e-6, what + " param");
      if (c.momentum != 0)
        expectClose(state[1], std::vector<double>(buf.begin(), buf.end()), 1e-6, 1e-6,
                    what + " buffer");
    }
  }
  // The schedules: with a unit gradient one step moves the param by -lr_t.
  struct Sched { const char *kind; int64_t warmup, decay; };
  for (const Sched &s : {Sched{"constant", 0, 0}, Sched{"constant", 3, 0}, Sched{"linear", 2, 7},
                         Sched{"cosine", 2, 7}, Sched{"cosine", 0, 5}}) {
    for (int64_t t : {1, 2, 3, 4, 6, 8, 12}) {
      HostTensor grad = make(f32, {2}, {1, 1}), step = stepTensor(t);
      std::vector<HostTensor> state = {make(f32, {2}, {0, 0})};
      ASSERT_OK(runOutputs(*backend, "sgd", {&grad, &step}, &state,
                           sgdAttrs(0.5, 0, 0, false, 0, s.kind, s.warmup, s.decay)));
      double lr = refSchedule(s.kind, 0.5, t, s.warmup, s.decay);
      expectClose(state[0], {-static_cast<float>(lr), -static_cast<float>(lr)}, 0, 0,
                  std::string("schedule ") + s.kind + " t=" + std::to_string(t));
    }
  }
  EXPECT_NEAR(refSchedule("cosine", 1, 5, 2, 6), 0.5 * (1 + std::cos(M_PI * 0.5)), 1e-12);
  EXPECT_NEAR(refSchedule("linear", 1, 2, 2, 6), 0.5, 1e-12);

  HostTensor grad = random({4}), zero = stepTensor(0);
  std::vector<HostTensor> state = {random({4})};
  Status status = runOutputs(*backend, "sgd", {&grad, &zero}, &state, sgdAttrs(0.1, 0, 0, false, 0));
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("sgd: step t = 0"), std::string::npos) << status.message();

  TensorDesc p = D(f32, {4}), s = D(i64, {});
  expectError(sigN("sgd", {p, s}, {p}, sgdAttrs(0.1, 0.9, 0, false, 0)),
              {"sgd", "momentum 0.9 needs a momentum_buffer"});
  expectError(sigN("sgd", {p, s}, {p, p}, sgdAttrs(0.1, 0, 0, false, 0)),
              {"sgd", "momentum_buffer", "momentum is 0"});
  expectError(sigN("sgd", {p, s}, {p, D(f32, {5})}, sgdAttrs(0.1, 0.9, 0, false, 0)),
              {"sgd", "momentum_buffer is 5xf32"});
  expectError(sigN("sgd", {D(f32, {5}), s}, {p}, sgdAttrs(0.1, 0, 0, false, 0)),
              {"sgd", "grad is 5xf32"});
  expectError(sigN("sgd", {p, D(i32, {})}, {p}, sgdAttrs(0.1, 0, 0, false, 0)),
              {"sgd", "step", "i32"});
  expectError(sigN("sgd", {p, s, p}, {p}, sgdAttrs(0.1, 0, 0, false, 0)),
              {"sgd", "grad_scale is 4xf32"});
  expectError(sigN("sgd", {p, s, s, s}, {p}, sgdAttrs(0.1, 0, 0, false, 0)),
              {"sgd", "expects 2 to 3 inputs, got 4"});
  expectError(sigN("sgd", {p, s}, {p, p}, sgdAttrs(0.1, 0.9, 0.1, true, 0)),
              {"sgd", "nesterov"});
  expectError(sigN("sgd", {p, s}, {p}, sgdAttrs(0.1, 0, 0, false, 0, "linear", 0, 0)),
              {"sgd", "linear schedule needs decay_steps > 0"});
  expectError(sigN("sgd", {p, s}, {p}, attrs({{"lr", F(0.1)}, {"momentum", F(0)}})),
              {"sgd", "missing attribute"});
}
// Training kernels of the contractions, poolings, attention, embedding and
// slice: each against a naive reference in doubles (the adjoint of the
// forward written as loops), plus load-time rejections.
//===----------------------------------------------------------------------===//

HostTensor toBf16(const HostTensor &t); // with the bf16 tests below
HostTensor toF32(const HostTensor &t);

class TrainingKernelTest : public KernelTest {
protected:
  void SetUp() override {
    KernelTest::SetUp();
  }

  /// Runs `s` (any number of outputs) on copies of `inputs`; the outputs
  /// start as garbage, and so does the scratch.
  Status runAll(const KernelSignature &s, const std::vector<const HostTensor *> &inputs,
                std::vector<HostTensor> *outs) {
    KernelFn fn;
    CLEAVE_RETURN_IF_ERROR(prepare(s, &fn));
    KernelCall call;
    std::vector<void *> owned;
    auto body = [&]() -> Status {
      auto alloc = [&](size_t bytes, unsigned char fill, const void *src, void **p) -> Status {
        CLEAVE_RETURN_IF_ERROR(backend->allocate(bytes, p));
        owned.push_back(*p);
        std::vector<unsigned char> junk(bytes, fill);
        return backend->copyToDevice(*p, src ? src : junk.data(), bytes);
      };
      for (const HostTensor *in : inputs) {
        void *p = nullptr;
        if (in)
          CLEAVE_RETURN_IF_ERROR(alloc(in->bytes.size(), 0, in->bytes.data(), &p));
        call.inputs.push_back(p);
      }
      outs->clear();
      for (const TensorDesc &d : s.outputs) {
        outs->emplace_back(d.dtype, d.shape);
        void *p = nullptr;
        CLEAVE_RETURN_IF_ERROR(alloc(outs->back().bytes.size(), 0xA5, nullptr, &p));
        call.outputs.push_back(p);
      }
      if (s.scratchBytes)
        CLEAVE_RETURN_IF_ERROR(alloc(s.scratchBytes, 0x5A, nullptr, &call.scratch));
      CLEAVE_RETURN_IF_ERROR(fn(call));
      CLEAVE_RETURN_IF_ERROR(backend->synchronize());
      for (size_t i = 0; i < outs->size(); ++i)
        CLEAVE_RETURN_IF_ERROR(backend->copyToHost((*outs)[i].bytes.data(), call.outputs[i],
                                                   (*outs)[i].bytes.size()));
      return {};
    };
    Status status = body();
    for (void *p : owned)
      backend->deallocate(p);
    return status;
  }
};

TEST_P(TrainingKernelTest, BuildersRejectMalformedSignatures) {
  for (const std::string &kernel : kTrainingContractionKernels) {
    if (!backend->hasKernel(kernel))
      continue; // a backend without it yet: the kernel tests below skip
    expectError(sig(kernel, {}, D(f32, {2})), {kernel + ":"});
    KernelSignature noOutput = sig(kernel, {D(f32, {2, 2})}, D(f32, {2, 2}));
    noOutput.outputs.clear();
    expectError(noOutput, {kernel + ":"});
    expectError(sig(kernel, std::vector<std::optional<TensorDesc>>(6), D(f32, {2})), {kernel + ":"});
  }
}

TEST_P(TrainingKernelTest, LinearBackwardWeightIsOneGemm) {
  REQUIRE_KERNEL("linear_backward_weight");
  for (Shape lead : {Shape{7}, Shape{2, 3}, Shape{1}, Shape{0}, Shape{3, 5, 2}}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{5, 3}, {17, 33}, {1, 1}}) {
      Shape gs = lead, xs = lead;
      gs.push_back(n);
      xs.push_back(k);
      HostTensor g = random(gs), x = random(xs), dw;
      ASSERT_OK(run("linear_backward_weight", {&g, &x}, D(f32, {n, k}), &dw));
      const int64_t m = numElements(lead);
      std::vector<double> want(n * k, 0.0);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < k; ++j)
            want[i * k + j] += g.at(r * n + i) * x.at(r * k + j);
      expectClose(dw, want, 1e-4, 1e-4, "linear_backward_weight " + describe(gs, f32));
    }
  }
  expectError(sig("linear_backward_weight", {D(f32, {4, 5}), D(f32, {3, 6})}, D(f32, {5, 6})),
              {"linear_backward_weight", "grad 4x5xf32", "input 3x6xf32", "leading dims"});
  expectError(sig("linear_backward_weight", {D(f32, {4, 5}), D(f32, {4, 6})}, D(f32, {6, 5})),
              {"linear_backward_weight", "output is 6x5xf32", "expected 5x6xf32"});
  expectError(sig("linear_backward_weight", {D(i64, {4, 5}), D(i64, {4, 6})}, D(i64, {5, 6})),
              {"linear_backward_weight", "grad", "i64"});
  expectError(sig("linear_backward_weight", {D(f32, {4, 5}), D(i32, {4, 6})}, D(f32, {5, 6})),
              {"linear_backward_weight", "different element types"});
  expectError(sig("linear_backward_weight", {D(f32, {4, 5}), std::nullopt}, D(f32, {5, 6})),
              {"linear_backward_weight", "input 1 (input) is missing"});
}

const std::vector<ConvCase> kConvBackwardCases = {
    {{2, 4, 9, 11}, {6, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
    {{1, 3, 16, 15}, {5, 3, 7, 7}, {2, 2}, {3, 3}, {1, 1}, 1, false},
    {{2, 4, 10, 10}, {6, 2, 3, 3}, {1, 2}, {0, 1}, {1, 1}, 2, false}, // groups
    {{1, 2, 12, 13}, {3, 2, 3, 2}, {1, 1}, {2, 1}, {2, 3}, 1, false}, // dilation
    {{2, 8, 7, 6}, {5, 8, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, false},   // direct GEMM
    {{2, 8, 7, 6}, {4, 8, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, false},   // strided 1x1
    {{1, 6, 8, 8}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6, false},   // depthwise
    {{2, 4, 5, 5}, {4, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 2, false},   // grouped direct
    {{1, 2, 4, 4}, {3, 2, 3, 3}, {3, 3}, {2, 2}, {1, 1}, 1, false},   // padding > stride
    {{1, 2, 11, 9}, {4, 1, 3, 2}, {2, 3}, {1, 0}, {2, 1}, 2, false},  // everything, odd
    {{3, 32, 14, 14}, {64, 32, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, false}, // threaded
    {{4, 32, 13, 13}, {32, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 32, false},  // depthwise tasks
    {{3, 16, 9, 9}, {32, 4, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 4, false},     // grouped tasks
    {{2, 16, 6, 6}, {16, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 8, false},     // grouped direct tasks
    // oneDNN's primitives (conv2dUsesPrimitive): more images than one call
    // takes (4 + 4 + 1: the weight's gradient summed over three calls),
    // padded blocks (5 filters, 3 channels), a stem, wide groups.
    {{9, 16, 9, 10}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
    {{6, 3, 11, 12}, {5, 3, 3, 3}, {2, 1}, {1, 0}, {1, 2}, 1, false},
    {{5, 3, 23, 22}, {16, 3, 7, 7}, {2, 2}, {3, 3}, {1, 1}, 1, false},
    {{2, 128, 8, 8}, {128, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, false},
    // Groups of 48 channels, and of 40: the blocked weight in the scratch is
    // padded to 48 channels a group.
    {{5, 96, 12, 12}, {96, 48, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, false},
    {{2, 80, 14, 14}, {80, 40, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, false},
};

/// For each (n, f, oy, ox, c, ky, kx) of a conv2d, fn(x index, w index, y index).
template <typename Fn> void forEachConvTap(const ConvCase &c, const Fn &fn) {
  const int64_t n = c.x[0], cin = c.x[1], h = c.x[2], wd = c.x[3];
  const int64_t f = c.w[0], cg = c.w[1], kh = c.w[2], kw = c.w[3];
  const int64_t oh = convOut(h, kh, c.stride[0], c.padding[0], c.dilation[0]);
  const int64_t ow = convOut(wd, kw, c.stride[1], c.padding[1], c.dilation[1]);
  const int64_t fg = f / c.groups;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t of = 0; of < f; ++of)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t g = of / fg;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t iy = oy * c.stride[0] - c.padding[0] + ky * c.dilation[0];
                int64_t ix = ox * c.stride[1] - c.padding[1] + kx * c.dilation[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd)
                  continue;
                fn(((in * cin + g * cg + ic) * h + iy) * wd + ix,
                   ((of * cg + ic) * kh + ky) * kw + kx, ((in * f + of) * oh + oy) * ow + ox);
              }
        }
}

TEST_P(TrainingKernelTest, Conv2dBackwardMatchesTheAdjoint) {
  REQUIRE_KERNEL("conv2d_backward_input");
  REQUIRE_KERNEL("conv2d_backward_weight");
  for (const ConvCase &c : kConvBackwardCases) {
    const int64_t oh = convOut(c.x[2], c.w[2], c.stride[0], c.padding[0], c.dilation[0]);
    const int64_t ow = convOut(c.x[3], c.w[3], c.stride[1], c.padding[1], c.dilation[1]);
    Shape out = {c.x[0], c.w[0], oh, ow};
    HostTensor x = random(c.x), w = random(c.w), g = random(out), dx, dw;
    Attributes a = attrs({{"stride", L(c.stride)}, {"padding", L(c.padding)},
                          {"dilation", L(c.dilation)}, {"groups", I(c.groups)}});
    size_t inScratch = conv2dBackwardInputScratchBytes(c.x, c.w, out, c.groups, c.stride,
                                                       c.padding, c.dilation, f32);
    size_t wScratch = conv2dBackwardWeightScratchBytes(c.x, c.w, out, c.groups, c.stride,
                                                       c.padding, c.dilation, f32);
    ASSERT_OK(run("conv2d_backward_input", {&g, &w}, D(f32, c.x), &dx, a, inScratch));
    ASSERT_OK(run("conv2d_backward_weight", {&g, &x}, D(f32, c.w), &dw, a, wScratch));
    std::vector<double> wantDx(numElements(c.x), 0.0), wantDw(numElements(c.w), 0.0);
    forEachConvTap(c, [&](int64_t xi, int64_t wi, int64_t yi) {
      wantDx[xi] += g.at(yi) * w.at(wi);
      wantDw[wi] += g.at(yi) * x.at(xi);
    });
    const std::string what = describe(c.x, f32) + " * " + describe(c.w, f32) + " stride " +
                             std::to_string(c.stride[0]) + "," + std::to_string(c.stride[1]) +
                             " groups " + std::to_string(c.groups);
    expectClose(dx, wantDx, 1e-4, 1e-4, "conv2d_backward_input " + what);
    expectClose(dw, wantDw, 1e-3, 1e-4, "conv2d_backward_weight " + what);
  }
}

TEST_P(TrainingKernelTest, Conv2dBackwardValidation) {
  REQUIRE_KERNEL("conv2d_backward_input");
  REQUIRE_KERNEL("conv2d_backward_weight");
  Attributes a = attrs({{"stride", L({1, 1})}, {"padding", L({0, 0})}, {"dilation", L({1, 1})},
                        {"groups", I(1)}});
  const size_t scratch = 1 << 20;
  // grad [1, 4, 6, 6], weight [4, 3, 3, 3], input [1, 3, 8, 8].
  expectError(sig("conv2d_backward_input", {D(f32, {1, 4, 5, 6}), D(f32, {4, 3, 3, 3})},
                  D(f32, {1, 3, 8, 8}), a, scratch),
              {"conv2d_backward_input", "grad 1x4x5x6xf32", "expected 1x4x6x6xf32"});
  expectError(sig("conv2d_backward_weight", {D(f32, {1, 4, 6, 6}), D(f32, {1, 3, 8, 8})},
                  D(f32, {4, 2, 3, 3}), a, scratch),
              {"conv2d_backward_weight", "needs 2 input channels per group", "has 3"});
  expectError(sig("conv2d_backward_input", {D(f32, {1, 4, 6, 6}), D(f32, {4, 3, 3, 3})},
                  D(f32, {1, 3, 8, 8}), a, 100),
              {"conv2d_backward_input", "needs 10560 bytes of scratch", "reserves 100"});
  expectError(sig("conv2d_backward_weight", {D(f32, {1, 4, 6, 6}), D(f32, {1, 3, 8, 8})},
                  D(f32, {4, 3, 3, 3}), a, 100),
              {"conv2d_backward_weight", "needs 10560 bytes of scratch", "reserves 100"});
  expectError(sig("conv2d_backward_input", {D(f32, {4, 6, 6}), D(f32, {4, 3, 3, 3})},
                  D(f32, {1, 3, 8, 8}), a, scratch),
              {"conv2d_backward_input", "grad must be 4-D"});
  expectError(sig("conv2d_backward_weight", {D(f32, {1, 4, 6, 6}), D(f32, {3, 8, 8})},
                  D(f32, {4, 3, 3, 3}), a, scratch),
              {"conv2d_backward_weight", "input must be 4-D"});
  expectError(sig("conv2d_backward_input", {D(f32, {1, 4, 6, 6}), D(i64, {4, 3, 3, 3})},
                  D(f32, {1, 3, 8, 8}), a, scratch),
              {"conv2d_backward_input", "weight", "different element types"});
  expectError(sig("conv2d_backward_input", {D(f32, {1, 4, 6, 6}), D(f32, {4, 3, 3, 3})},
                  D(f32, {1, 3, 8, 8}),
                  attrs({{"stride", L({1, 1})}, {"padding", L({0, 0})}, {"groups", I(1)}}),
                  scratch),
              {"conv2d_backward_input", "missing attribute 'dilation'"});
  expectError(sig("conv2d_backward_weight", {D(f32, {1, 4, 6, 6}), D(f32, {1, 3, 8, 8})},
                  D(f32, {4, 3, 3, 3}),
                  attrs({{"stride", L({1, 1})}, {"padding", L({0, 0})}, {"dilation", L({1, 1})},
                         {"groups", I(2)}}),
                  scratch),
              {"conv2d_backward_weight", "3 channels", "groups = 2"});
  expectError(sig("conv2d_backward_weight", {D(f32, {1, 4, 6, 6}), D(f32, {1, 3, 8, 8})},
                  D(f32, {4, 3, 3, 3}),
                  attrs({{"stride", L({1, 1})}, {"padding", L({-1, 0})}, {"dilation", L({1, 1})},
                         {"groups", I(1)}}),
                  scratch),
              {"conv2d_backward_weight", "'padding' entries must be >= 0"});
  expectError(sig("conv2d_backward_input", {D(f32, {1, 4, 1, 1}), D(f32, {4, 3, 3, 3})},
                  D(f32, {1, 3, 2, 2}), a, scratch),
              {"conv2d_backward_input", "larger than the padded input"});
  expectError(sig("conv2d_backward_input", {D(f16, {1, 4, 6, 6}), D(f16, {4, 3, 3, 3})},
                  D(f16, {1, 3, 8, 8}), a, scratch),
              {"no f16 kernel for 'conv2d_backward_input'"});
  // The direct-GEMM case needs no scratch.
  KernelFn fn;
  ASSERT_OK(prepare(sig("conv2d_backward_input", {D(f32, {1, 4, 8, 8}), D(f32, {4, 3, 1, 1})},
                        D(f32, {1, 3, 8, 8}), a, 0),
                    &fn));
  ASSERT_OK(prepare(sig("conv2d_backward_weight", {D(f32, {1, 4, 8, 8}), D(f32, {1, 3, 8, 8})},
                        D(f32, {4, 3, 1, 1}), a, 0),
                    &fn));
}

/// The forward window of (oy, ox): fn(iy, ix) for each in-bounds tap in
/// scan order.
template <typename Fn>
void forEachWindowTap(const PoolCase &c, int64_t h, int64_t w, int64_t oy, int64_t ox,
                      const Fn &fn) {
  for (int64_t ky = 0; ky < c.kernel[0]; ++ky)
    for (int64_t kx = 0; kx < c.kernel[1]; ++kx) {
      int64_t iy = oy * c.stride[0] - c.padding[0] + ky * c.dilation[0];
      int64_t ix = ox * c.stride[1] - c.padding[1] + kx * c.dilation[1];
      if (iy >= 0 && iy < h && ix >= 0 && ix < w)
        fn(iy, ix);
    }
}

TEST_P(TrainingKernelTest, MaxPool2dBackwardRoutesToTheFirstMaximum) {
  REQUIRE_KERNEL("max_pool2d_backward");
  for (const PoolCase &c : kPoolCases) {
    const int64_t h = c.x[2], w = c.x[3], planes = c.x[0] * c.x[1];
    const int64_t oh = poolOut(h, c.kernel[0], c.stride[0], c.padding[0], c.dilation[0], c.ceil);
    const int64_t ow = poolOut(w, c.kernel[1], c.stride[1], c.padding[1], c.dilation[1], c.ceil);
    // Few distinct values, so windows hold ties; a NaN and -inf here and there.
    HostTensor x = randomInts(f32, c.x, -3, 3), g = random({c.x[0], c.x[1], oh, ow}), dx;
    x.as<float>()[0] = -std::numeric_limits<float>::infinity();
    if (x.numel() > 40)
      x.as<float>()[37] = std::numeric_limits<float>::quiet_NaN();
    Attributes a = attrs({{"kernel", L(c.kernel)}, {"stride", L(c.stride)},
                          {"padding", L(c.padding)}, {"dilation", L(c.dilation)},
                          {"ceil_mode", B(c.ceil)}});
    ASSERT_OK(run("max_pool2d_backward", {&g, &x}, x.desc, &dx, a));
    std::vector<double> want(x.numel(), 0.0);
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          // PyTorch: start at the first in-bounds tap; `v > max || isnan(v)`.
          int64_t best = -1;
          double m = -kInf;
          forEachWindowTap(c, h, w, oy, ox, [&](int64_t iy, int64_t ix) {
            int64_t i = (p * h + iy) * w + ix;
            double v = x.at(i);
            if (best < 0)
              best = i;
            if (v > m || std::isnan(v)) {
              m = v;
              best = i;
            }
          });
          want[best] += g.at((p * oh + oy) * ow + ox);
        }
    expectClose(dx, want, 1e-6, 1e-6, "max_pool2d_backward " + describe(c.x, f32));
  }
  // All -inf: each window's gradient goes to its first in-bounds element.
  HostTensor x = make(f32, {1, 1, 2, 2}, {-kInf, -kInf, -kInf, -kInf});
  HostTensor g = make(f32, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), dx;
  ASSERT_OK(run("max_pool2d_backward", {&g, &x}, x.desc, &dx,
                attrs({{"kernel", L({2, 2})}, {"stride", L({1, 1})}, {"padding", L({1, 1})},
                       {"dilation", L({1, 1})}})));
  expectEqual(dx, {1 + 2 + 4 + 5, 3 + 6, 7 + 8, 9}, "all -inf");
}

TEST_P(TrainingKernelTest, AvgPool2dBackwardSpreadsWithTheForwardsDivisor) {
  REQUIRE_KERNEL("avg_pool2d_backward");
  for (const PoolCase &c : kPoolCases) {
    for (bool includePad : {true, false}) {
      const int64_t h = c.x[2], w = c.x[3], planes = c.x[0] * c.x[1];
      const int64_t oh = poolOut(h, c.kernel[0], c.stride[0], c.padding[0], 1, c.ceil);
      const int64_t ow = poolOut(w, c.kernel[1], c.stride[1], c.padding[1], 1, c.ceil);
      HostTensor g = random({c.x[0], c.x[1], oh, ow}), dx;
      Attributes a = attrs({{"kernel", L(c.kernel)}, {"stride", L(c.stride)},
                            {"padding", L(c.padding)}, {"ceil_mode", B(c.ceil)},
                            {"count_include_pad", B(includePad)}});
      ASSERT_OK(run("avg_pool2d_backward", {&g}, D(f32, c.x), &dx, a));
      std::vector<double> want(numElements(c.x), 0.0);
      for (int64_t p = 0; p < planes; ++p)
        for (int64_t oy = 0; oy < oh; ++oy)
          for (int64_t ox = 0; ox < ow; ++ox) {
            // PyTorch: the padded count stops at the padded input's edge.
            int64_t y0 = oy * c.stride[0] - c.padding[0], x0 = ox * c.stride[1] - c.padding[1];
            int64_t y1 = std::min(y0 + c.kernel[0], h + c.padding[0]);
            int64_t x1 = std::min(x0 + c.kernel[1], w + c.padding[1]);
            int64_t padded = (y1 - y0) * (x1 - x0);
            int64_t inside = (std::min(y1, h) - std::max<int64_t>(y0, 0)) *
                             (std::min(x1, w) - std::max<int64_t>(x0, 0));
            double delta = g.at((p * oh + oy) * ow + ox) / (includePad ? padded : inside);
            for (int64_t iy = std::max<int64_t>(y0, 0); iy < std::min(y1, h); ++iy)
              for (int64_t ix = std::max<int64_t>(x0, 0); ix < std::min(x1, w); ++ix)
                want[(p * h + iy) * w + ix] += delta;
          }
      expectClose(dx, want, 1e-6, 1e-5,
                  "avg_pool2d_backward " + describe(c.x, f32) + (includePad ? " pad" : ""));
    }
  }
}

TEST_P(TrainingKernelTest, AdaptiveAvgPool2dBackwardSpreadsOverBins) {
  REQUIRE_KERNEL("adaptive_avg_pool2d_backward");
  struct Case { Shape x; Ints size; };
  for (const Case &c : {Case{{2, 3, 7, 7}, {1, 1}}, Case{{1, 2, 10, 9}, {3, 4}},
                        Case{{1, 1, 5, 3}, {7, 6}}, Case{{2, 2, 8, 8}, {4, 4}},
                        Case{{8, 128, 7, 7}, {1, 1}}, Case{{4, 64, 9, 11}, {5, 3}}}) {
    const int64_t h = c.x[2], w = c.x[3], oh = c.size[0], ow = c.size[1];
    HostTensor g = random({c.x[0], c.x[1], oh, ow}), dx;
    ASSERT_OK(run("adaptive_avg_pool2d_backward", {&g}, D(f32, c.x), &dx));
    std::vector<double> want(numElements(c.x), 0.0);
    for (int64_t p = 0; p < c.x[0] * c.x[1]; ++p)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t y0 = static_cast<int64_t>(std::floor(double(oy * h) / oh));
          int64_t y1 = static_cast<int64_t>(std::ceil(double((oy + 1) * h) / oh));
          int64_t x0 = static_cast<int64_t>(std::floor(double(ox * w) / ow));
          int64_t x1 = static_cast<int64_t>(std::ceil(double((ox + 1) * w) / ow));
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix)
              want[(p * h + iy) * w + ix] +=
                  g.at((p * oh + oy) * ow + ox) / ((y1 - y0) * (x1 - x0));
        }
    expectClose(dx, want, 1e-6, 1e-5, "adaptive_avg_pool2d_backward " + describe(c.x, f32));
  }
}

TEST_P(TrainingKernelTest, PoolBackwardValidation) {
  REQUIRE_KERNEL("max_pool2d_backward");
  REQUIRE_KERNEL("avg_pool2d_backward");
  REQUIRE_KERNEL("adaptive_avg_pool2d_backward");
  Attributes a = attrs({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"padding", L({1, 1})},
                        {"dilation", L({1, 1})}});
  // x [1, 2, 9, 9] pools to [1, 2, 5, 5].
  expectError(sig("max_pool2d_backward", {D(f32, {1, 2, 4, 5}), D(f32, {1, 2, 9, 9})},
                  D(f32, {1, 2, 9, 9}), a),
              {"max_pool2d_backward", "grad 1x2x4x5xf32", "expected 1x2x5x5xf32"});
  expectError(sig("max_pool2d_backward", {D(f32, {1, 2, 5, 5}), D(f32, {1, 2, 9, 9})},
                  D(f32, {1, 2, 9, 8}), a),
              {"max_pool2d_backward", "output 1x2x9x8xf32", "input's shape"});
  expectError(sig("max_pool2d_backward", {D(f32, {1, 2, 5, 5})}, D(f32, {1, 2, 9, 9}), a),
              {"max_pool2d_backward", "2 inputs"});
  expectError(sig("max_pool2d_backward", {D(f32, {1, 2, 5, 5}), D(f32, {1, 2, 9, 9})},
                  D(f32, {1, 2, 9, 9}),
                  attrs({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"padding", L({2, 2})},
                         {"dilation", L({1, 1})}})),
              {"max_pool2d_backward", "at most half the kernel"});
  expectError(sig("max_pool2d_backward", {D(i64, {1, 2, 5, 5}), D(i64, {1, 2, 9, 9})},
                  D(i64, {1, 2, 9, 9}), a),
              {"max_pool2d_backward", "grad", "i64"});
  expectError(sig("avg_pool2d_backward", {D(f32, {1, 2, 5, 5})}, D(f32, {1, 2, 9, 9}),
                  attrs({{"kernel", L({3, 3})}, {"padding", L({1, 1})}})),
              {"avg_pool2d_backward", "missing attribute 'stride'"});
  expectError(sig("avg_pool2d_backward", {D(f32, {1, 2, 5, 5})}, D(f32, {1, 2, 10, 10}),
                  attrs({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"padding", L({1, 1})},
                         {"ceil_mode", B(true)}})),
              {"avg_pool2d_backward", "expected 1x2x6x6xf32"});
  expectError(sig("avg_pool2d_backward", {D(f32, {2, 5, 5})}, D(f32, {1, 2, 9, 9}), a),
              {"avg_pool2d_backward", "grad must be 4-D"});
  expectError(sig("adaptive_avg_pool2d_backward", {D(f32, {1, 3, 1, 1})}, D(f32, {1, 2, 7, 7})),
              {"adaptive_avg_pool2d_backward", "same N and C"});
  expectError(sig("adaptive_avg_pool2d_backward", {D(f32, {1, 2, 1, 1})}, D(f32, {1, 2, 0, 7})),
              {"adaptive_avg_pool2d_backward", "empty plane"});
  expectError(sig("adaptive_avg_pool2d_backward", {D(f32, {1, 2, 1, 1})}, D(f32, {2, 7, 7})),
              {"adaptive_avg_pool2d_backward", "output must be 4-D"});
  // Windows that fall wholly in the ceil_mode overhang add nothing.
  KernelFn fn;
  ASSERT_OK(prepare(sig("avg_pool2d_backward", {D(f32, {1, 2, 5, 5})}, D(f32, {1, 2, 9, 9}), a), &fn));
}

/// The gradients of softmax(scale q k^T, masked) v in doubles: dq, dk, dv.
/// With `y` (the forward's output as the kernel reads it), each row's
/// sum_j P dP is taken as rowsum(g * y), as the kernels compute it (equal
/// for an exact y). With `squares`, the sums of the squares of each
/// gradient element's terms (P g, scale dS q, scale dS k), in the same
/// order.
std::vector<std::vector<double>>
refAttentionBackward(const HostTensor &g, const HostTensor &q, const HostTensor &k,
                     const HostTensor &v, bool causal, double scale, const HostTensor *y = nullptr,
                     std::vector<std::vector<double>> *squares = nullptr) {
  const Shape &qs = q.desc.shape;
  const int64_t heads = qs[0] * qs[1], sq = qs[2], d = qs[3];
  const int64_t sk = k.desc.shape[2], dv = v.desc.shape[3];
  std::vector<double> dq(heads * sq * d, 0.0), dk(heads * sk * d, 0.0), dvv(heads * sk * dv, 0.0);
  std::vector<double> sqDq(dq.size(), 0.0), sqDk(dk.size(), 0.0), sqDv(dvv.size(), 0.0);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < sq; ++i) {
      std::vector<double> p(sk, 0.0);
      double mx = -kInf;
      bool any = false;
      for (int64_t j = 0; j < sk; ++j) {
        if (causal && j > i + sk - sq)
          continue;
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += q.at((h * sq + i) * d + c) * k.at((h * sk + j) * d + c);
        p[j] = dot * scale;
        mx = std::max(mx, p[j]);
        any = true;
      }
      if (!any)
        continue; // the row's output is zeros whatever q, k, v
      double sum = 0;
      for (int64_t j = 0; j < sk; ++j) {
        p[j] = causal && j > i + sk - sq ? 0.0 : std::exp(p[j] - mx);
        sum += p[j];
      }
      for (double &x : p)
        x /= sum;
      // dP = g v^T; dS = P (dP - sum_j P dP).
      std::vector<double> dp(sk, 0.0);
      double rowDot = 0;
      for (int64_t j = 0; j < sk; ++j) {
        for (int64_t c = 0; c < dv; ++c)
          dp[j] += g.at((h * sq + i) * dv + c) * v.at((h * sk + j) * dv + c);
        rowDot += p[j] * dp[j];
      }
      if (y) {
        rowDot = 0;
        for (int64_t c = 0; c < dv; ++c)
          rowDot += g.at((h * sq + i) * dv + c) * y->at((h * sq + i) * dv + c);
      }
      for (int64_t j = 0; j < sk; ++j) {
        const double ds = p[j] * (dp[j] - rowDot);
        for (int64_t c = 0; c < dv; ++c) {
          const double t = p[j] * g.at((h * sq + i) * dv + c);
          dvv[(h * sk + j) * dv + c] += t;
          sqDv[(h * sk + j) * dv + c] += t * t;
        }
        for (int64_t c = 0; c < d; ++c) {
          const double tq = scale * ds * k.at((h * sk + j) * d + c);
          const double tk = scale * ds * q.at((h * sq + i) * d + c);
          dq[(h * sq + i) * d + c] += tq;
          dk[(h * sk + j) * d + c] += tk;
          sqDq[(h * sq + i) * d + c] += tq * tq;
          sqDk[(h * sk + j) * d + c] += tk * tk;
        }
      }
    }
  if (squares)
    *squares = {sqDq, sqDk, sqDv};
  return {dq, dk, dvv};
}

TEST_P(TrainingKernelTest, AttentionBackwardMatchesReference) {
  REQUIRE_KERNEL("attention_backward");
  struct Case {
    Shape q, k, v;
    bool causal;
    double scale;
  };
  const std::vector<Case> cases = {
      {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, true, 1.0},
      {{2, 3, 37, 16}, {2, 3, 37, 16}, {2, 3, 37, 16}, true, 0.25},
      {{2, 3, 37, 16}, {2, 3, 37, 16}, {2, 3, 37, 16}, false, 0.25},
      {{1, 2, 130, 32}, {1, 2, 130, 32}, {1, 2, 130, 32}, true, 0.125},
      {{1, 2, 5, 8}, {1, 2, 70, 8}, {1, 2, 70, 8}, true, 0.35},
      {{1, 2, 33, 8}, {1, 2, 129, 8}, {1, 2, 129, 24}, true, -0.3},
      {{1, 2, 70, 8}, {1, 2, 5, 8}, {1, 2, 5, 3}, false, 0.5},
      {{1, 2, 7, 4}, {1, 2, 3, 4}, {1, 2, 3, 5}, true, 0.5}, // rows that see no key
      {{3, 1, 65, 7}, {3, 1, 65, 7}, {3, 1, 65, 9}, false, 1.0},
      {{4, 8, 67, 16}, {4, 8, 67, 16}, {4, 8, 67, 16}, true, 0.25}, // one task per head
      // Wide heads: the CUDA tiles need more than 48 KiB of shared memory.
      {{1, 2, 100, 128}, {1, 2, 100, 128}, {1, 2, 100, 128}, true, 0.088},
      {{1, 1, 40, 256}, {1, 1, 33, 256}, {1, 1, 33, 200}, false, 0.0625},
  };
  for (const Case &c : cases) {
    HostTensor q = random(c.q), k = random(c.k), v = random(c.v);
    Shape out = {c.q[0], c.q[1], c.q[2], c.v[3]};
    HostTensor g = random(out);
    // The forward's output, as the plan passes it.
    HostTensor y = make(f32, out, refAttention(q, k, v, c.causal, c.scale));
    for (int64_t h = 0; h < c.q[0] * c.q[1]; ++h) // rows that see no key are zeros
      for (int64_t i = 0; i < c.q[2]; ++i)
        if (c.causal && i + c.k[2] - c.q[2] < 0)
          for (int64_t col = 0; col < c.v[3]; ++col)
            y.as<float>()[(h * c.q[2] + i) * c.v[3] + col] = 0.0f;
    KernelSignature s;
    s.kernel = "attention_backward";
    s.inputs = {g.desc, q.desc, k.desc, v.desc, y.desc};
    s.outputs = {q.desc, k.desc, v.desc};
    s.attrs = attrs({{"causal", B(c.causal)}, {"scale", F(c.scale)}});
    s.scratchBytes = attentionBackwardScratchBytes(c.q);
    std::vector<HostTensor> grads;
    ASSERT_OK(runAll(s, {&g, &q, &k, &v, &y}, &grads));
    std::vector<std::vector<double>> want = refAttentionBackward(g, q, k, v, c.causal, c.scale);
    const std::string what = std::string(c.causal ? "causal " : "") + "attention_backward q " +
                             describe(c.q, f32) + " k " + describe(c.k, f32);
    expectClose(grads[0], want[0], 1e-4, 1e-4, what + " dq");
    expectClose(grads[1], want[1], 1e-4, 1e-4, what + " dk");
    expectClose(grads[2], want[2], 1e-4, 1e-4, what + " dv");
  }
}

TEST_P(TrainingKernelTest, AttentionBackwardValidation) {
  REQUIRE_KERNEL("attention_backward");
  TensorDesc q = D(f32, {2, 4, 8, 16});
  Attributes a = attrs({{"causal", B(true)}, {"scale", F(0.25)}});
  auto make5 = [&](std::vector<std::optional<TensorDesc>> in, std::vector<TensorDesc> out,
                   size_t scratch) {
    KernelSignature s;
    s.kernel = "attention_backward";
    s.inputs = std::move(in);
    s.outputs = std::move(out);
    s.attrs = a;
    s.scratchBytes = scratch;
    return s;
  };
  const size_t scratch = 2 * 4 * 8 * 8;
  KernelFn fn;
  ASSERT_OK(prepare(make5({q, q, q, q, q}, {q, q, q}, scratch), &fn));
  expectError(make5({q, q, q, q}, {q, q, q}, scratch), {"attention_backward", "5 inputs"});
  expectError(make5({q, q, q, q, q}, {q, q}, scratch), {"attention_backward", "3 outputs"});
  expectError(make5({q, q, q, q, q}, {q, q, q}, scratch - 1),
              {"attention_backward", "needs 512 bytes of scratch", "reserves 511"});
  expectError(make5({q, q, std::nullopt, q, q}, {q, q, q}, scratch),
              {"attention_backward", "input 2 (k) is missing"});
  expectError(make5({D(f32, {2, 4, 8, 15}), q, q, q, q}, {q, q, q}, scratch),
              {"attention_backward", "grad 2x4x8x15xf32"});
  expectError(make5({q, q, q, q, D(f32, {2, 4, 9, 16})}, {q, q, q}, scratch),
              {"attention_backward", "output 2x4x9x16xf32"});
  expectError(make5({q, q, D(f32, {2, 4, 8, 8}), q, q}, {q, q, q}, scratch),
              {"attention_backward", "k 2x4x8x8xf32"});
  expectError(make5({q, q, q, q, q}, {q, D(f32, {2, 4, 8, 8}), q}, scratch),
              {"attention_backward", "grad_k is 2x4x8x8xf32"});
  expectError(make5({q, D(i64, {2, 4, 8, 16}), q, q, q}, {q, q, q}, scratch),
              {"attention_backward", "q", "i64"});
  expectError(make5({q, q, q, q, D(f32, {4, 8, 16})}, {q, q, q}, scratch),
              {"attention_backward", "output must be 4-D"});
}

TEST_P(TrainingKernelTest, EmbeddingBackwardScatterAdds) {
  REQUIRE_KERNEL("embedding_backward");
  for (DType it : {i64, i32}) {
    for (bool padding : {false, true}) {
      const int64_t rows = 13, dim = 37;
      HostTensor ids = randomInts(it, {3, 7}, 0, rows - 1), g = random({3, 7, dim}), dw;
      Attributes a = padding ? attrs({{"padding_idx", I(4)}}) : Attributes();
      ASSERT_OK(run("embedding_backward", {&g, &ids}, D(f32, {rows, dim}), &dw, a));
      std::vector<double> want(rows * dim, 0.0);
      for (int64_t i = 0; i < 21; ++i) {
        int64_t r = static_cast<int64_t>(ids.at(i));
        if (padding && r == 4)
          continue;
        for (int64_t c = 0; c < dim; ++c)
          want[r * dim + c] += g.at(i * dim + c);
      }
      expectClose(dw, want, 1e-5, 1e-5, std::string("embedding_backward ") + dtypeName(it));
    }
  }
  // A shard of rows [10, 15): other indices belong to other ranks.
  HostTensor ids = make(i64, {6}, {10, 3, 14, 12, 10, 20}), g = random({6, 4}), dw;
  ASSERT_OK(run("embedding_backward", {&g, &ids}, D(f32, {5, 4}), &dw,
                attrs({{"row_offset", I(10)}, {"padding_idx", I(12)}})));
  std::vector<double> want(20, 0.0);
  for (int64_t c = 0; c < 4; ++c) {
    want[0 * 4 + c] = static_cast<double>(g.as<float>()[0 * 4 + c] + g.as<float>()[4 * 4 + c]);
    want[4 * 4 + c] = g.at(2 * 4 + c);
  }
  expectClose(dw, want, 1e-6, 1e-6, "sharded embedding_backward");
  // A large one over threads: deterministic, positions summed in order.
  HostTensor bigIds = randomInts(i64, {4096}, 0, 31), bigG = random({4096, 256}), a1, a2;
  ASSERT_OK(run("embedding_backward", {&bigG, &bigIds}, D(f32, {32, 256}), &a1));
  ASSERT_OK(run("embedding_backward", {&bigG, &bigIds}, D(f32, {32, 256}), &a2));
  EXPECT_EQ(a1.bytes, a2.bytes);
  std::vector<float> inOrder(32 * 256, 0.0f);
  for (int64_t i = 0; i < 4096; ++i)
    for (int64_t c = 0; c < 256; ++c)
      inOrder[bigIds.as<int64_t>()[i] * 256 + c] += bigG.as<float>()[i * 256 + c];
  EXPECT_EQ(0, std::memcmp(inOrder.data(), a1.bytes.data(), a1.bytes.size()));
  // Out of range: a run-time error naming the position.
  HostTensor bad = make(i32, {3}, {1, 13, 2}), g3 = random({3, 4});
  Status status = run("embedding_backward", {&g3, &bad}, D(f32, {13, 4}), &dw);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("embedding_backward: index 13 at position 1"), std::string::npos)
      << status.message();
  expectError(sig("embedding_backward", {D(f32, {3, 5}), D(i64, {3})}, D(f32, {10, 4})),
              {"embedding_backward", "grad 3x5xf32", "3x4xf32"});
  expectError(sig("embedding_backward", {D(f32, {3, 4}), D(f32, {3})}, D(f32, {10, 4})),
              {"embedding_backward", "indices", "f32"});
  expectError(sig("embedding_backward", {D(f32, {3, 4}), D(i64, {3})}, D(f32, {10, 4, 1})),
              {"embedding_backward", "output must be 2-D"});
  expectError(sig("embedding_backward", {D(f32, {3, 4}), D(i64, {3})}, D(f32, {10, 4}),
                  attrs({{"padding_idx", S("none")}})),
              {"embedding_backward", "'padding_idx'"});
}

TEST_P(TrainingKernelTest, SliceBackwardPlacesTheGradient) {
  REQUIRE_KERNEL("slice_backward");
  struct Case { Shape x; int64_t dim, start, end, step; };
  std::vector<Case> cases = {
      {{4, 9}, 1, 2, 7, 1}, {{4, 9}, 0, 1, 4, 2}, {{3, 10, 5}, 1, 0, 10, 3}, {{3, 10, 5}, 2, 1, 4, 2},
      {{3, 10, 5}, 1, 4, 4, 1}, {{6}, 0, 0, 6, 5}, {{2, 8, 384}, 2, 128, 256, 1}, {{5, 3}, 0, 2, 5, 1},
      {{64, 3, 1024}, 1, 1, 2, 1},
  };
  for (DType dt : {f32, i64, bf16}) {
    for (const Case &c : cases) {
      int64_t count = c.end == c.start ? 0 : 1 + (c.end - c.start - 1) / c.step;
      Shape gs = c.x;
      gs[c.dim] = count;
      HostTensor g = random(gs), dx;
      if (dt != f32)
        g = make(dt, gs, g.values());
      Attributes a = attrs({{"dim", I(c.dim)}, {"start", I(c.start)}, {"end", I(c.end)},
                            {"step", I(c.step)}});
      ASSERT_OK(run("slice_backward", {&g}, D(dt, c.x), &dx, a));
      std::vector<double> want(numElements(c.x), 0.0);
      for (int64_t i = 0; i < g.numel(); ++i) {
        std::vector<int64_t> idx = unravel(i, gs);
        idx[c.dim] = c.start + idx[c.dim] * c.step;
        want[ravel(idx, c.x)] = g.at(i);
      }
      expectEqual(dx, want, "slice_backward " + describe(c.x, dt) + " dim " + std::to_string(c.dim));
    }
  }
  expectError(sig("slice_backward", {D(f32, {2})}, D(f32, {5}),
                  attrs({{"dim", I(0)}, {"start", I(2)}, {"end", I(6)}})),
              {"slice_backward", "[2:6:1]", "size 5"});
  expectError(sig("slice_backward", {D(f32, {2})}, D(f32, {5}),
                  attrs({{"dim", I(0)}, {"start", I(0)}, {"end", I(5)}, {"step", I(2)}})),
              {"slice_backward", "grad 2xf32", "must be 3xf32"});
  expectError(sig("slice_backward", {D(f32, {2})}, D(f32, {5}),
                  attrs({{"dim", I(1)}, {"start", I(0)}, {"end", I(2)}})),
              {"slice_backward", "dim 1 is out of range for rank 1"});
  expectError(sig("slice_backward", {D(f32, {2})}, D(i64, {5}),
                  attrs({{"dim", I(0)}, {"start", I(0)}, {"end", I(2)}})),
              {"slice_backward", "different element types"});
  expectError(sig("slice_backward", {D(f32, {2})}, D(f32, {5}), attrs({{"dim", I(0)}, {"start", I(0)}})),
              {"slice_backward", "missing attribute 'end'"});
}

//===----------------------------------------------------------------------===//
// bf16 gradients on the CUDA backend. Mixed precision plans hand these
// kernels bf16 operands: the CPU backend widens them to its f32 kernels (a
// backend concern, not the builders', checked by Bf16KernelTest), the GPU's
// read bf16, compute and accumulate in fp32 and round each result once.
//
// The operands are rounded to bf16 first and the double references above
// run on those exact values, so the inputs' rounding is no part of the
// error. What remains, per element w of a result:
//   * its rounding to bf16, |bf16(r) - r| <= 2^-8 |r| (8 significant bits,
//     half an ulp): allowed as kBf16Ulp |w| = 2^-7 |w|, twice the bound;
//   * the kernel's fp32 arithmetic: the f32 test's atol and rtol;
//   * for the library calls (cuBLASLt, cuDNN), a reduction of L products
//     t_l split in parts whose partial sums may be rounded to bf16 on the
//     way (cuDNN's algorithms may; linear_backward_weight asks cuBLASLt for
//     fp32 partials, the bound covers it anyway): each partial errs by at
//     most 2^-8 of itself, and partials are random walks of the size of
//     mass = sqrt(sum_l t_l^2) (the terms' rms times sqrt(L)), so the
//     tolerance adds 2 kBf16Ulp mass = 2^-6 sqrt(L) rms(t), a few ulps
//     times sqrt(L). An index error moves an element by about its mass,
//     60 times that.
// The poolings and embedding_backward compute exactly the f32 kernel's fp32
// sums on the widened values (additions and divisions only, same order):
// their results are the f32 results rounded, equal value for value.
// (The CPU's widened kernels pass these numeric checks too; they skip on
// the CPU, whose mixed-dtype errors are the backend's own wording.)
//===----------------------------------------------------------------------===//

constexpr double kBf16Ulp = 1.0 / 128; // 2^-7, bf16's spacing at 1
const char *const kBf16OnCpu =
    "the CPU backend widens bf16 around its f32 training kernels (Bf16KernelTest)";

/// got (bf16) against want: |got - want| <= atol + (rtol + kBf16Ulp) |want|
/// + 2 kBf16Ulp mass[i] (no mass term when `mass` is empty).
void expectBf16Close(const HostTensor &got, const std::vector<double> &want,
                     const std::vector<double> &mass, double atol, double rtol,
                     const std::string &what) {
  ASSERT_EQ(got.desc.dtype, bf16) << what;
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  int reported = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.at(i), w = want[i];
    const double tol = atol + (rtol + kBf16Ulp) * std::fabs(w) +
                       (mass.empty() ? 0.0 : 2 * kBf16Ulp * mass[i]);
    const bool ok = std::isnan(w) ? std::isnan(g) : std::isinf(w) ? g == w
                                                                   : std::fabs(g - w) <= tol;
    if (!ok && reported++ < 5)
      ADD_FAILURE() << what << " element " << i << " of " << describe(got.desc.shape, bf16)
                    << ": got " << g << ", want " << w << " (tolerance " << tol << ")";
  }
}

std::vector<double> rootOf(std::vector<double> squares) {
  for (double &v : squares)
    v = std::sqrt(v);
  return squares;
}

// Rows that are not a multiple of 16 bytes (GPT-2's vocabulary of 50257):
// linear's output and matmul's lhs go to cuBLASLt's unaligned kernels as
// they are; linear_backward_weight's grad is staged through the CUDA
// backend's workspace in blocks of 2048 columns and a tail (ColumnBlocks,
// runtime/cuda/GemmCall.h). The same numbers as any GEMM: f32 on every
// backend, bf16 on the GPU.
TEST_P(TrainingKernelTest, GemmsOfUnalignedRowsMatchReference) {
  REQUIRE_KERNEL("linear_backward_weight");
  for (DType dt : {f32, bf16}) {
    if (dt == bf16 && GetParam() != "cuda")
      continue; // kBf16OnCpu
    auto typed = [&](const HostTensor &t) { return dt == bf16 ? toBf16(t) : t; };
    auto check = [&](const HostTensor &got, const std::vector<double> &want,
                     const std::vector<double> &squares, const std::string &what) {
      if (dt == bf16)
        expectBf16Close(got, want, rootOf(squares), 1e-4, 1e-4, "bf16 " + what);
      else
        expectClose(got, want, 1e-4, 1e-4, what);
    };
    {
      const int64_t m = 2500, n = 1031, k = 40;
      HostTensor x = typed(random({m, k})), w = typed(random({n, k})), b = typed(random({n}));
      HostTensor y, z;
      ASSERT_OK(run("linear", {&x, &w, &b}, D(dt, {m, n}), &y));
      std::vector<double> want(m * n), squares(m * n, 0.0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = b.at(j);
          for (int64_t p = 0; p < k; ++p) {
            const double t = x.at(i * k + p) * w.at(j * k + p);
            s += t;
            squares[i * n + j] += t * t;
          }
          want[i * n + j] = s;
        }
      check(y, want, squares, "linear 2500x40 by 1031x40");
      // matmul(y [m, n], w [n, k]): the contraction runs along y's rows.
      HostTensor a = typed(random({m, n}));
      ASSERT_OK(run("matmul", {&a, &w}, D(dt, {m, k}), &z));
      std::vector<double> wantZ(m * k, 0.0), squaresZ(m * k, 0.0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t p = 0; p < n; ++p)
          for (int64_t j = 0; j < k; ++j) {
            const double t = a.at(i * n + p) * w.at(p * k + j);
            wantZ[i * k + j] += t;
            squaresZ[i * k + j] += t * t;
          }
      check(z, wantZ, squaresZ, "matmul 2500x1031 by 1031x40");
    }
    {
      const int64_t rows = 300, n = 4999, k = 24;
      HostTensor g = typed(random({rows, n})), x = typed(random({rows, k})), dw;
      ASSERT_OK(run("linear_backward_weight", {&g, &x}, D(dt, {n, k}), &dw));
      std::vector<double> want(n * k, 0.0), squares(n * k, 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const double t = g.at(r * n + i) * x.at(r * k + j);
            want[i * k + j] += t;
            squares[i * k + j] += t * t;
          }
      check(dw, want, squares, "linear_backward_weight 300x4999, 300x24");
    }
  }
}

TEST_P(TrainingKernelTest, LinearBackwardWeightTakesBf16OnCuda) {
  REQUIRE_KERNEL("linear_backward_weight");
  if (GetParam() != "cuda")
    GTEST_SKIP() << kBf16OnCpu;
  // Odd n and k: leading dims of 2-byte elements off cuBLASLt's 16 bytes;
  // 1024 rows: a reduction long enough to be split.
  for (Shape lead : {Shape{7}, Shape{2, 3}, Shape{1}, Shape{0}, Shape{4, 256}}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{5, 3}, {17, 33}, {1, 1}, {64, 48}}) {
      Shape gs = lead, xs = lead;
      gs.push_back(n);
      xs.push_back(k);
      HostTensor g = toBf16(random(gs)), x = toBf16(random(xs)), dw;
      ASSERT_OK(run("linear_backward_weight", {&g, &x}, D(bf16, {n, k}), &dw));
      const int64_t m = numElements(lead);
      std::vector<double> want(n * k, 0.0), squares(n * k, 0.0);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const double t = g.at(r * n + i) * x.at(r * k + j);
            want[i * k + j] += t;
            squares[i * k + j] += t * t;
          }
      expectBf16Close(dw, want, rootOf(squares), 1e-4, 1e-4,
                      "bf16 linear_backward_weight " + describe(gs, bf16) + " " +
                          describe(xs, bf16));
    }
  }
  expectError(sig("linear_backward_weight", {D(bf16, {4, 5}), D(f32, {4, 6})}, D(bf16, {5, 6})),
              {"linear_backward_weight", "different element types"});
  expectError(sig("linear_backward_weight", {D(bf16, {4, 5}), D(bf16, {4, 6})}, D(f32, {5, 6})),
              {"linear_backward_weight", "output is 5x6xf32", "expected 5x6xbf16"});
}

TEST_P(TrainingKernelTest, Conv2dBackwardTakesBf16OnCuda) {
  REQUIRE_KERNEL("conv2d_backward_input");
  REQUIRE_KERNEL("conv2d_backward_weight");
  if (GetParam() != "cuda")
    GTEST_SKIP() << kBf16OnCpu;
  for (const ConvCase &c : kConvBackwardCases) {
    const int64_t oh = convOut(c.x[2], c.w[2], c.stride[0], c.padding[0], c.dilation[0]);
    const int64_t ow = convOut(c.x[3], c.w[3], c.stride[1], c.padding[1], c.dilation[1]);
    Shape out = {c.x[0], c.w[0], oh, ow};
    HostTensor x = toBf16(random(c.x)), w = toBf16(random(c.w)), g = toBf16(random(out)), dx, dw;
    Attributes a = attrs({{"stride", L(c.stride)}, {"padding", L(c.padding)},
                          {"dilation", L(c.dilation)}, {"groups", I(c.groups)}});
    // The plan's scratch for a bf16 instruction (the CPU's f32 column matrix).
    size_t inScratch = conv2dBackwardInputScratchBytes(c.x, c.w, out, c.groups, c.stride,
                                                       c.padding, c.dilation, bf16);
    size_t wScratch = conv2dBackwardWeightScratchBytes(c.x, c.w, out, c.groups, c.stride,
                                                       c.padding, c.dilation, bf16);
    const std::string what = describe(c.x, bf16) + " * " + describe(c.w, bf16) + " stride " +
                             std::to_string(c.stride[0]) + "," + std::to_string(c.stride[1]) +
                             " groups " + std::to_string(c.groups);
    ASSERT_OK(run("conv2d_backward_input", {&g, &w}, D(bf16, c.x), &dx, a, inScratch));
    ASSERT_OK(run("conv2d_backward_weight", {&g, &x}, D(bf16, c.w), &dw, a, wScratch));
    std::vector<double> wantDx(numElements(c.x), 0.0), wantDw(numElements(c.w), 0.0);
    std::vector<double> sqDx(wantDx.size(), 0.0), sqDw(wantDw.size(), 0.0);
    forEachConvTap(c, [&](int64_t xi, int64_t wi, int64_t yi) {
      const double tx = g.at(yi) * w.at(wi), tw = g.at(yi) * x.at(xi);
      wantDx[xi] += tx;
      sqDx[xi] += tx * tx;
      wantDw[wi] += tw;
      sqDw[wi] += tw * tw;
    });
    expectBf16Close(dx, wantDx, rootOf(sqDx), 1e-4, 1e-4, "bf16 conv2d_backward_input " + what);
    expectBf16Close(dw, wantDw, rootOf(sqDw), 1e-4, 1e-3, "bf16 conv2d_backward_weight " + what);
  }
}

TEST_P(TrainingKernelTest, PoolBackwardTakesBf16OnCuda) {
  REQUIRE_KERNEL("max_pool2d_backward");
  REQUIRE_KERNEL("avg_pool2d_backward");
  REQUIRE_KERNEL("adaptive_avg_pool2d_backward");
  if (GetParam() != "cuda")
    GTEST_SKIP() << kBf16OnCpu;
  // The bf16 kernel against the f32 one on the widened operands (which the
  // f32 tests check against the references), rounded: value for value.
  auto expectRounded = [&](const std::string &kernel, const std::vector<const HostTensor *> &in,
                           const Shape &out, const Attributes &a) {
    std::vector<HostTensor> wide;
    wide.reserve(in.size());
    std::vector<const HostTensor *> wideIn;
    for (const HostTensor *t : in) {
      wide.push_back(toF32(*t));
      wideIn.push_back(&wide.back());
    }
    HostTensor got, reference;
    ASSERT_OK(run(kernel, in, D(bf16, out), &got, a));
    ASSERT_OK(run(kernel, wideIn, D(f32, out), &reference, a));
    expectEqual(got, toBf16(reference).values(), "bf16 " + kernel + " " + describe(out, bf16));
  };
  for (const PoolCase &c : kPoolCases) {
    const int64_t h = c.x[2], w = c.x[3];
    {
      const int64_t oh = poolOut(h, c.kernel[0], c.stride[0], c.padding[0], c.dilation[0], c.ceil);
      const int64_t ow = poolOut(w, c.kernel[1], c.stride[1], c.padding[1], c.dilation[1], c.ceil);
      // Ties, -inf and a NaN as in the f32 test; all exact in bf16.
      HostTensor x = toBf16(randomInts(f32, c.x, -3, 3));
      HostTensor g = toBf16(random({c.x[0], c.x[1], oh, ow}));
      x.as<uint16_t>()[0] = floatToBf16(-std::numeric_limits<float>::infinity());
      if (x.numel() > 40)
        x.as<uint16_t>()[37] = floatToBf16(std::numeric_limits<float>::quiet_NaN());
      expectRounded("max_pool2d_backward", {&g, &x}, c.x,
                    attrs({{"kernel", L(c.kernel)}, {"stride", L(c.stride)},
                           {"padding", L(c.padding)}, {"dilation", L(c.dilation)},
                           {"ceil_mode", B(c.ceil)}}));
    }
    const int64_t oh = poolOut(h, c.kernel[0], c.stride[0], c.padding[0], 1, c.ceil);
    const int64_t ow = poolOut(w, c.kernel[1], c.stride[1], c.padding[1], 1, c.ceil);
    for (bool includePad : {true, false}) {
      HostTensor g = toBf16(random({c.x[0], c.x[1], oh, ow}));
      expectRounded("avg_pool2d_backward", {&g}, c.x,
                    attrs({{"kernel", L(c.kernel)}, {"stride", L(c.stride)},
                           {"padding", L(c.padding)}, {"ceil_mode", B(c.ceil)},
                           {"count_include_pad", B(includePad)}}));
    }
  }
  struct Case { Shape x; Ints size; };
  for (const Case &c : {Case{{2, 3, 7, 7}, {1, 1}}, Case{{1, 2, 10, 9}, {3, 4}},
                        Case{{1, 1, 5, 3}, {7, 6}}, Case{{4, 64, 9, 11}, {5, 3}}}) {
    HostTensor g = toBf16(random({c.x[0], c.x[1], c.size[0], c.size[1]}));
    expectRounded("adaptive_avg_pool2d_backward", {&g}, c.x, {});
  }
  expectError(sig("avg_pool2d_backward", {D(bf16, {1, 2, 5, 5})}, D(f32, {1, 2, 9, 9}),
                  attrs({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"padding", L({1, 1})}})),
              {"avg_pool2d_backward", "different element types"});
}

TEST_P(TrainingKernelTest, AttentionBackwardTakesBf16OnCuda) {
  REQUIRE_KERNEL("attention_backward");
  if (GetParam() != "cuda")
    GTEST_SKIP() << kBf16OnCpu;
  struct Case {
    Shape q, k, v;
    bool causal;
    double scale;
  };
  // The f32 test's shapes: partial tiles, Sq != Sk both ways, rows that see
  // no key, Dv != D, and heads of 128 and 256. Heads up to 128 wide run on
  // tensor cores (64 x 64 tiles, P = 64 or 128: the GPT-sized cases below
  // span several tiles with a causal diagonal through them); 200 and 256
  // take the fp32 kernels.
  const std::vector<Case> cases = {
      {{2, 3, 256, 64}, {2, 3, 256, 64}, {2, 3, 256, 64}, true, 0.125},
      {{1, 2, 200, 64}, {1, 2, 200, 64}, {1, 2, 200, 64}, false, 0.125},
      {{1, 2, 77, 72}, {1, 2, 150, 72}, {1, 2, 150, 40}, true, 0.12},
      {{1, 2, 150, 64}, {1, 2, 70, 64}, {1, 2, 70, 64}, true, 0.125}, // rows that see no key
      {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, true, 1.0},
      {{2, 3, 37, 16}, {2, 3, 37, 16}, {2, 3, 37, 16}, true, 0.25},
      {{2, 3, 37, 16}, {2, 3, 37, 16}, {2, 3, 37, 16}, false, 0.25},
      {{1, 2, 130, 32}, {1, 2, 130, 32}, {1, 2, 130, 32}, true, 0.125},
      {{1, 2, 33, 8}, {1, 2, 129, 8}, {1, 2, 129, 24}, true, -0.3},
      {{1, 2, 70, 8}, {1, 2, 5, 8}, {1, 2, 5, 3}, false, 0.5},
      {{1, 2, 7, 4}, {1, 2, 3, 4}, {1, 2, 3, 5}, true, 0.5},
      {{3, 1, 65, 7}, {3, 1, 65, 7}, {3, 1, 65, 9}, false, 1.0},
      {{1, 2, 100, 128}, {1, 2, 100, 128}, {1, 2, 100, 128}, true, 0.088},
      {{1, 1, 40, 256}, {1, 1, 33, 256}, {1, 1, 33, 200}, false, 0.0625},
  };
  for (const Case &c : cases) {
    HostTensor q = toBf16(random(c.q)), k = toBf16(random(c.k)), v = toBf16(random(c.v));
    Shape out = {c.q[0], c.q[1], c.q[2], c.v[3]};
    HostTensor g = toBf16(random(out));
    // The forward's output as a bf16 plan holds it; the reference takes
    // rowsum(g * y) from this y, as the kernel does.
    std::vector<double> yv = refAttention(q, k, v, c.causal, c.scale);
    for (int64_t h = 0; h < c.q[0] * c.q[1]; ++h) // rows that see no key are zeros
      for (int64_t i = 0; i < c.q[2]; ++i)
        if (c.causal && i + c.k[2] - c.q[2] < 0)
          for (int64_t col = 0; col < c.v[3]; ++col)
            yv[(h * c.q[2] + i) * c.v[3] + col] = 0.0;
    HostTensor y = make(bf16, out, yv);
    KernelSignature s;
    s.kernel = "attention_backward";
    s.inputs = {g.desc, q.desc, k.desc, v.desc, y.desc};
    s.outputs = {q.desc, k.desc, v.desc};
    s.attrs = attrs({{"causal", B(c.causal)}, {"scale", F(c.scale)}});
    s.scratchBytes = attentionBackwardScratchBytes(c.q); // f32 statistics, whatever the dtype
    std::vector<HostTensor> grads;
    ASSERT_OK(runAll(s, {&g, &q, &k, &v, &y}, &grads));
    std::vector<std::vector<double>> squares;
    std::vector<std::vector<double>> want =
        refAttentionBackward(g, q, k, v, c.causal, c.scale, &y, &squares);
    const std::string what = std::string(c.causal ? "causal " : "") +
                             "bf16 attention_backward q " + describe(c.q, bf16) + " k " +
                             describe(c.k, bf16);
    // fp32 scores and sums (the f32 kernel's 1e-4 tolerances), each result
    // rounded once; on tensor cores P and dS are also rounded to bf16
    // before their products (2^-8 of each term, at most): the reduction's
    // mass term covers that, as it does the library calls' partials.
    const bool tensorCores = std::max(c.q[3], c.v[3]) <= 128;
    for (int i = 0; i < 3; ++i)
      expectBf16Close(grads[i], want[i], tensorCores ? rootOf(squares[i]) : std::vector<double>{},
                      1e-4, 1e-4, what + (i == 0 ? " dq" : i == 1 ? " dk" : " dv"));
  }
  // Every float operand the same dtype.
  TensorDesc q = D(bf16, {2, 4, 8, 16});
  KernelSignature mixed;
  mixed.kernel = "attention_backward";
  mixed.inputs = {q, q, q, q, D(f32, {2, 4, 8, 16})};
  mixed.outputs = {q, q, q};
  mixed.scratchBytes = attentionBackwardScratchBytes(q.shape);
  expectError(mixed, {"attention_backward", "different element types"});
}

TEST_P(TrainingKernelTest, EmbeddingBackwardTakesBf16OnCuda) {
  REQUIRE_KERNEL("embedding_backward");
  if (GetParam() != "cuda")
    GTEST_SKIP() << kBf16OnCpu;
  // Bit for bit the CPU's widened kernel: each table row sums its positions'
  // (widened) gradient rows in position order in f32, then rounds once.
  auto expectInOrder = [&](const HostTensor &ids, const HostTensor &g, int64_t rows, int64_t dim,
                           const Attributes &a, int64_t offset, int64_t padding,
                           const std::string &what) {
    HostTensor dw;
    ASSERT_OK(run("embedding_backward", {&g, &ids}, D(bf16, {rows, dim}), &dw, a));
    std::vector<float> sums(rows * dim, 0.0f);
    for (int64_t i = 0; i < ids.numel(); ++i) {
      const int64_t index = static_cast<int64_t>(ids.at(i)), row = index - offset;
      if (row < 0 || row >= rows || index == padding)
        continue;
      for (int64_t c = 0; c < dim; ++c)
        sums[row * dim + c] += static_cast<float>(g.at(i * dim + c));
    }
    HostTensor want(bf16, {rows, dim});
    for (int64_t i = 0; i < rows * dim; ++i)
      want.as<uint16_t>()[i] = floatToBf16(sums[i]);
    EXPECT_EQ(0, std::memcmp(want.bytes.data(), dw.bytes.data(), dw.bytes.size())) << what;
    expectEqual(dw, want.values(), what);
  };
  const int64_t none = std::numeric_limits<int64_t>::min();
  for (DType it : {i64, i32})
    for (bool padding : {false, true}) {
      const int64_t rows = 13, dim = 37;
      HostTensor ids = randomInts(it, {3, 7}, 0, rows - 1), g = toBf16(random({3, 7, dim}));
      expectInOrder(ids, g, rows, dim, padding ? attrs({{"padding_idx", I(4)}}) : Attributes(), 0,
                    padding ? 4 : none,
                    std::string("bf16 embedding_backward ") + dtypeName(it) +
                        (padding ? " padding" : ""));
    }
  HostTensor shardIds = make(i64, {6}, {10, 3, 14, 12, 10, 20}), shardG = toBf16(random({6, 4}));
  expectInOrder(shardIds, shardG, 5, 4, attrs({{"row_offset", I(10)}, {"padding_idx", I(12)}}),
                10, 12, "bf16 sharded embedding_backward");
  // Many positions per row (rounding once matters), several column chunks.
  HostTensor bigIds = randomInts(i64, {4096}, 0, 31), bigG = toBf16(random({4096, 300}));
  expectInOrder(bigIds, bigG, 32, 300, {}, 0, none, "bf16 embedding_backward 4096 positions");
  // No positions: zeros.
  HostTensor noIds(i64, {0}), noG(bf16, {0, 8});
  expectInOrder(noIds, noG, 3, 8, {}, 0, none, "bf16 embedding_backward of nothing");
  expectError(sig("embedding_backward", {D(bf16, {3, 4}), D(i64, {3})}, D(f32, {10, 4})),
              {"embedding_backward", "different element types"});
}

INSTANTIATE_TEST_SUITE_P(Backends, TrainingKernelTest,
                         ::testing::Values(std::string("cpu"), std::string("cuda")),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

//===----------------------------------------------------------------------===//
// bf16: conversions, kernels widened to f32, and the kernels that take bf16
// directly.
//===----------------------------------------------------------------------===//

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(BFloat16, RoundsToNearestTiesToEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  // Halfway between 0x3f80 (even) and 0x3f81: down to the even one.
  EXPECT_EQ(floatToBf16(floatOf(0x3f808000)), 0x3f80);
  // Halfway between 0x3f81 (odd) and 0x3f82: up to the even one.
  EXPECT_EQ(floatToBf16(floatOf(0x3f818000)), 0x3f82);
  // Just above and below halfway go to the nearer.
  EXPECT_EQ(floatToBf16(floatOf(0x3f808001)), 0x3f81);
  EXPECT_EQ(floatToBf16(floatOf(0x3f817fff)), 0x3f81);
  // Negative values round by magnitude.
  EXPECT_EQ(floatToBf16(floatOf(0xbf818000)), 0xbf82);
  EXPECT_EQ(floatToBf16(floatOf(0xbf808000)), 0xbf80);
  // A carry out of the mantissa bumps the exponent: 1.9999999 -> 2.
  EXPECT_EQ(floatToBf16(floatOf(0x3fffffff)), 0x4000);
  // Subnormals and signed zeros.
  EXPECT_EQ(floatToBf16(floatOf(0x00018000)), 0x0002);
  EXPECT_EQ(floatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(bf16ToFloat(0x3f82), 1.015625f);
  EXPECT_EQ(bf16ToFloat(0xc0a0), -5.0f);
}

TEST(BFloat16, InfinityAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToBf16(inf), 0x7f80);
  EXPECT_EQ(floatToBf16(-inf), 0xff80);
  EXPECT_EQ(bf16ToFloat(0x7f80), inf);
  // The largest finite bf16 stays; values past its rounding boundary
  // become infinity, as in PyTorch.
  EXPECT_EQ(floatToBf16(bf16ToFloat(0x7f7f)), 0x7f7f);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  // NaN stays NaN, with its sign, even when its payload is only in the low
  // bits that bf16 drops (truncation would make it infinity).
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) {
    uint16_t b = floatToBf16(floatOf(nan));
    EXPECT_TRUE(std::isnan(bf16ToFloat(b))) << std::hex << nan << " -> " << b;
    EXPECT_EQ(b & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
  }
}

TEST(BFloat16, WideningIsExactAndRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    float f = bf16ToFloat(static_cast<uint16_t>(b));
    EXPECT_EQ(bitsOf(f), b << 16);
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(f))));
    else
      EXPECT_EQ(floatToBf16(f), b) << std::hex << b;
  }
}

/// `t` rounded to bf16.
HostTensor toBf16(const HostTensor &t) {
  HostTensor out(bf16, t.desc.shape);
  if (t.desc.dtype == bf16)
    return t;
  for (int64_t i = 0; i < t.numel(); ++i)
    out.as<uint16_t>()[i] = floatToBf16(static_cast<float>(t.at(i)));
  return out;
}

/// `t` widened to f32 (exact for bf16).
HostTensor toF32(const HostTensor &t) {
  HostTensor out(f32, t.desc.shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    out.as<float>()[i] = static_cast<float>(t.at(i));
  return out;
}

/// Runs kernels on bf16 copies of float inputs (other dtypes as they are) and
/// checks the results bit for bit against the f32 kernel on the same
/// (widened) values, rounded to bf16: what the widening path promises.
class Bf16KernelTest : public KernelTest {
protected:
  /// `computes`: the kernel computes new values (not a selection), so some
  /// of its f32 results must need rounding.
  void expectWidened(const std::string &kernel, const std::vector<const HostTensor *> &inputs,
                     TensorDesc out, Attributes a = {}, size_t scratch = 0, bool computes = true) {
    std::vector<HostTensor> narrow, wide;
    narrow.reserve(inputs.size());
    wide.reserve(inputs.size());
    std::vector<const HostTensor *> narrowIn, wideIn;
    for (const HostTensor *in : inputs) {
      if (!in) {
        narrowIn.push_back(nullptr);
        wideIn.push_back(nullptr);
        continue;
      }
      bool isFloat = in->desc.dtype == f32 || in->desc.dtype == bf16;
      narrow.push_back(isFloat ? toBf16(*in) : *in);
      wide.push_back(isFloat ? toF32(narrow.back()) : *in);
      narrowIn.push_back(&narrow.back());
      wideIn.push_back(&wide.back());
    }
    TensorDesc narrowOut = out;
    if (out.dtype == f32)
      narrowOut.dtype = bf16;
    HostTensor got, reference;
    ASSERT_OK(run(kernel, narrowIn, narrowOut, &got, a, scratch));
    ASSERT_OK(run(kernel, wideIn, out, &reference, a, scratch));
    HostTensor want = out.dtype == f32 ? toBf16(reference) : reference;
    ASSERT_EQ(got.desc, want.desc) << kernel;
    int mismatches = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      bool same = got.desc.dtype == bf16 ? got.as<uint16_t>()[i] == want.as<uint16_t>()[i]
                                         : got.at(i) == want.at(i);
      if (!same && mismatches++ < 5)
        ADD_FAILURE() << kernel << " element " << i << ": got " << got.at(i) << ", want "
                      << want.at(i);
    }
    // The rounding is real: the bf16 result differs from the f32 one.
    if (out.dtype == f32 && computes) {
      bool rounded = false;
      for (int64_t i = 0; i < reference.numel() && !rounded; ++i)
        rounded = reference.at(i) != want.at(i);
      EXPECT_TRUE(rounded) << kernel << ": no element was rounded";
    }
  }
};

TEST_P(Bf16KernelTest, AddWithBroadcasting) {
  HostTensor x = random({2, 3, 8}), y = random({8}), z = random({3, 1});
  expectWidened("add", {&x, &y}, D(f32, {2, 3, 8}));
  expectWidened("mul", {&z, &x}, D(f32, {2, 3, 8}));
}

TEST_P(Bf16KernelTest, LinearAndMatmulAccumulateInF32) {
  HostTensor x = random({4, 5, 96}), w = random({24, 96}), b = random({24});
  expectWidened("linear", {&x, &w, &b}, D(f32, {4, 5, 24}));
  expectWidened("linear", {&x, &w}, D(f32, {4, 5, 24}));
  HostTensor q = random({2, 3, 8, 16}), k = random({2, 3, 16, 8});
  expectWidened("matmul", {&q, &k}, D(f32, {2, 3, 8, 8}));
}

TEST_P(Bf16KernelTest, Normalizations) {
  HostTensor x = random({3, 7, 32}, -4, 4), w = random({32}), b = random({32});
  expectWidened("softmax", {&x}, D(f32, {3, 7, 32}), attrs({{"dim", I(2)}}));
  expectWidened("softmax", {&x}, D(f32, {3, 7, 32}), attrs({{"dim", I(1)}}));
  expectWidened("layer_norm", {&x, &w, &b}, D(f32, {3, 7, 32}),
                attrs({{"normalized_shape", L({32})}, {"eps", F(1e-5)}}));
  expectWidened("layer_norm", {&x, nullptr, nullptr}, D(f32, {3, 7, 32}),
                attrs({{"normalized_shape", L({7, 32})}, {"eps", F(1e-5)}}));
  expectWidened("reduce_mean", {&x}, D(f32, {3, 1, 32}),
                attrs({{"dims", L({1})}, {"keepdim", B(true)}}));
}

TEST_P(Bf16KernelTest, TrainingBackwardsAreWidened) {
  HostTensor x = random({4, 33}), g = random({4, 33});
  expectWidened("gelu_backward", {&g, &x}, D(f32, {4, 33}));
  expectWidened("silu_backward", {&g, &x}, D(f32, {4, 33}));
  expectWidened("relu_backward", {&g, &x}, D(f32, {4, 33}), {}, 0, /*computes=*/false);
  HostTensor y = random({4, 33}, 0, 1);
  expectWidened("softmax_backward", {&g, &y}, D(f32, {4, 33}), attrs({{"dim", I(1)}}));
  HostTensor step = make(i64, {}, {3});
  expectWidened("dropout_train", {&x, &step}, D(f32, {4, 33}),
                attrs({{"p", F(0.25)}, {"seed", I(1)}, {"stream", I(0)}}));
}

TEST_P(Bf16KernelTest, OtherOperandsStayAsTheyAre) {
  // where: an i1 condition next to bf16 values; compare: bf16 in, i1 out.
  HostTensor c = randomBools({4, 6}), x = random({4, 6}), y = random({6});
  expectWidened("where", {&c, &x, &y}, D(f32, {4, 6}), {}, 0, /*computes=*/false);
  expectWidened("compare", {&x, &y}, D(i1, {4, 6}), attrs({{"predicate", S("lt")}}));
  HostTensor img = random({1, 3, 9, 9}), filt = random({4, 3, 3, 3});
  Attributes conv = attrs(
      {{"stride", L({1, 1})}, {"padding", L({1, 1})}, {"dilation", L({1, 1})}, {"groups", I(1)}});
  // The im2col matrix is f32 for a bf16 conv2d too: the kernel is widened.
  size_t scratch =
      conv2dScratchBytes({1, 3, 9, 9}, {4, 3, 3, 3}, {1, 4, 9, 9}, 1, {1, 1}, {1, 1}, {1, 1}, bf16);
  EXPECT_EQ(scratch, conv2dScratchBytes({1, 3, 9, 9}, {4, 3, 3, 3}, {1, 4, 9, 9}, 1, {1, 1}, {1, 1},
                                        {1, 1}, f32));
  expectWidened("conv2d", {&img, &filt}, D(f32, {1, 4, 9, 9}), conv, scratch);
}

TEST_P(Bf16KernelTest, AWidenedWeightIsNotTheKernelsOwn) {
  // The widened weight is the backend's staging buffer, rewritten on every
  // call: the f32 conv2d must not prepack it (ownedConstants), or its second
  // call would read a plain weight as a prepacked one.
  HostTensor img = toBf16(random({2, 16, 9, 9})), filt = toBf16(random({64, 16, 3, 3}));
  Attributes conv = attrs(
      {{"stride", L({1, 1})}, {"padding", L({1, 1})}, {"dilation", L({1, 1})}, {"groups", I(1)}});
  Shape out = {2, 64, 9, 9};
  size_t scratch =
      conv2dScratchBytes({2, 16, 9, 9}, {64, 16, 3, 3}, out, 1, {1, 1}, {1, 1}, {1, 1}, bf16);
  HostTensor plain, owned;
  ASSERT_OK(run("conv2d", {&img, &filt}, D(bf16, out), &plain, conv, scratch));
  KernelSignature s = sig("conv2d", {img.desc, filt.desc}, D(bf16, out), conv, scratch);
  s.ownedConstants = {false, true};
  ASSERT_OK(run(s, {&img, &filt}, &owned, /*calls=*/2));
  EXPECT_EQ(owned.bytes, plain.bytes);
}

TEST_P(Bf16KernelTest, CastConvertsDirectly) {
  HostTensor x = make(f32, {8}, {1.0, 1.00390625, 1.01171875, -2.5, 1e30, -0.0, 3.99, 65537.0});
  HostTensor y;
  ASSERT_OK(run("cast", {&x}, D(bf16, {8}), &y));
  std::vector<uint16_t> want;
  for (int64_t i = 0; i < x.numel(); ++i)
    want.push_back(floatToBf16(x.as<float>()[i]));
  EXPECT_EQ(std::vector<uint16_t>(y.as<uint16_t>(), y.as<uint16_t>() + 8), want);
  EXPECT_EQ(y.as<uint16_t>()[1], 0x3f80); // the tie rounds to even
  HostTensor back;
  ASSERT_OK(run("cast", {&y}, D(f32, {8}), &back));
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(back.as<float>()[i], bf16ToFloat(want[i]));
  // To integers: truncation toward zero of the bf16 value; to i1: non-zero.
  HostTensor b = make(bf16, {4}, {-2.5, 3.999, 0.0, 1.5}), n;
  ASSERT_OK(run("cast", {&b}, D(i64, {4}), &n));
  expectEqual(n, {-2, 4, 0, 1}); // 3.999 is 4.0 in bf16
  ASSERT_OK(run("cast", {&b}, D(i32, {4}), &n));
  expectEqual(n, {-2, 4, 0, 1});
  ASSERT_OK(run("cast", {&b}, D(i1, {4}), &n));
  expectEqual(n, {1, 1, 0, 1});
  // From integers and i1: through f32, as PyTorch rounds them.
  HostTensor big = make(i64, {3}, {257, -7, 1 << 20}), r;
  ASSERT_OK(run("cast", {&big}, D(bf16, {3}), &r));
  expectEqual(r, {256, -7, 1 << 20});
  HostTensor flags = make(i1, {2}, {1, 0});
  ASSERT_OK(run("cast", {&flags}, D(bf16, {2}), &r));
  expectEqual(r, {1, 0});
}

TEST_P(Bf16KernelTest, EmbeddingGathersBf16Rows) {
  HostTensor table = toBf16(random({10, 6})), ids = make(i64, {2, 3}, {0, 9, 3, 3, 1, 7}), y;
  ASSERT_OK(run("embedding", {&table, &ids}, D(bf16, {2, 3, 6}), &y));
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_EQ(y.as<uint16_t>()[i * 6 + j], table.as<uint16_t>()[ids.as<int64_t>()[i] * 6 + j]);
}

TEST_P(Bf16KernelTest, WidenedInstructionsAreChecked) {
  // A bf16 instruction run as its f32 kernel still checks its shapes, and
  // its float operands share one type.
  expectError(sig("matmul", {D(bf16, {2, 4}), D(bf16, {3, 5})}, D(bf16, {2, 5})),
              {"bf16 matmul, run as its f32 kernel", "matmul", "contraction"});
  expectError(sig("add", {D(bf16, {4}), D(f32, {4})}, D(bf16, {4})),
              {"add: mixes bf16 and f32 operands"});
}

TEST_P(Bf16KernelTest, StagingIsSizedToTheLargestInstruction) {
  if (GetParam() != "cpu")
    GTEST_SKIP() << "the staging is the CPU backend's";
  KernelFn fn;
  EXPECT_EQ(backend->workspaceBytes(), 0u);
  ASSERT_OK(prepare(sig("add", {D(bf16, {1024}), D(bf16, {1024})}, D(bf16, {1024})), &fn));
  EXPECT_EQ(backend->workspaceBytes(), 3u * 4096); // two inputs and the output, in f32
  ASSERT_OK(prepare(sig("add", {D(bf16, {16}), D(bf16, {16})}, D(bf16, {16})), &fn));
  EXPECT_EQ(backend->workspaceBytes(), 3u * 4096); // shared, not added
  ASSERT_OK(prepare(sig("relu", {D(bf16, {4096})}, D(bf16, {4096})), &fn));
  EXPECT_EQ(backend->workspaceBytes(), 2u * 16384);
  // Kernels that take bf16 need none.
  std::string why;
  auto fresh = makeBackend(GetParam(), &why);
  ASSERT_TRUE(fresh) << why;
  ASSERT_OK(fresh->prepareKernel(
      sig("permute", {D(bf16, {64, 32})}, D(bf16, {32, 64}), attrs({{"dims", L({1, 0})}})), &fn));
  ASSERT_OK(fresh->prepareKernel(sig("cast", {D(bf16, {64})}, D(f32, {64})), &fn));
  EXPECT_EQ(fresh->workspaceBytes(), 0u);
}

//===----------------------------------------------------------------------===//
// Special functions (runtime/SpecialMath.h), against libstdc++'s C++17
// special math functions and identities. Both backends compute in double and
// round once; the tolerances are float's.
//===----------------------------------------------------------------------===//

TEST_P(KernelTest, SpecialUnaryMatchLibstdcxx) {
  std::vector<UnaryCase> cases = {
      {"lgamma", [](double x) { return std::lgamma(x); }, -7.5, 30, {}},
      {"i0", [](double x) { return std::cyl_bessel_i(0.0, std::fabs(x)); }, -40, 40, {}},
      {"i1", [](double x) { return std::copysign(std::cyl_bessel_i(1.0, std::fabs(x)), x); }, -40, 40, {}},
      {"i0e", [](double x) { return std::exp(-std::fabs(x)) * std::cyl_bessel_i(0.0, std::fabs(x)); }, -60, 60, {}},
      {"i1e", [](double x) { return std::copysign(std::exp(-std::fabs(x)) * std::cyl_bessel_i(1.0, std::fabs(x)), x); }, -60, 60, {}},
      {"bessel_j0", [](double x) { return std::cyl_bessel_j(0.0, std::fabs(x)); }, -30, 30, {}},
      {"bessel_j1", [](double x) { return x < 0 ? -std::cyl_bessel_j(1.0, -x) : std::cyl_bessel_j(1.0, x); }, -30, 30, {}},
      {"bessel_y0", [](double x) { return std::cyl_neumann(0.0, x); }, 0.01, 30, {}},
      {"bessel_y1", [](double x) { return std::cyl_neumann(1.0, x); }, 0.05, 30, {}},
      {"modified_bessel_k0", [](double x) { return std::cyl_bessel_k(0.0, x); }, 0.001, 40, {}},
      {"modified_bessel_k1", [](double x) { return std::cyl_bessel_k(1.0, x); }, 0.01, 40, {}},
      {"scaled_modified_bessel_k0", [](double x) { return std::exp(x) * std::cyl_bessel_k(0.0, x); }, 0.001, 60, {}},
      {"scaled_modified_bessel_k1", [](double x) { return std::exp(x) * std::cyl_bessel_k(1.0, x); }, 0.01, 60, {}},
      {"erfcx", [](double x) { return std::exp(x * x) * std::erfc(x); }, -5, 20, {}},
      // Inverses: erf(erfinv(x)) = x and ndtr(ndtri(p)) = p are checked below.
      // polygamma(1, x) = zeta(2, x) = sum 1/(x+k)^2 for x > 0: the derivative
      // of lgamma's derivative; checked through riemann_zeta at x = 1 below.
  };
  for (const UnaryCase &c : cases) {
    HostTensor x = random({97}, c.lo, c.hi);
    HostTensor y;
    ASSERT_OK(run(c.kernel, {&x}, x.desc, &y, c.attrs));
    std::vector<double> want;
    for (double v : x.values())
      want.push_back(c.ref(static_cast<float>(v)));
    // Float's accuracy near the zeros of J and Y needs an absolute slack.
    expectClose(y, want, 2e-6, 2e-5, c.kernel);
  }
}

TEST_P(KernelTest, SpecialInversesAndKnownValues) {
  HostTensor p = random({64}, 0.001, 0.999), y;
  ASSERT_OK(run("erfinv", {&p}, p.desc, &y));
  std::vector<double> back;
  for (int64_t i = 0; i < y.numel(); ++i)
    back.push_back(std::erf(y.at(i)));
  std::vector<double> want = p.values();
  HostTensor roundTrip = make(f32, {64}, back);
  expectClose(roundTrip, want, 1e-6, 1e-6, "erf(erfinv(x))");
  ASSERT_OK(run("ndtri", {&p}, p.desc, &y));
  back.clear();
  for (int64_t i = 0; i < y.numel(); ++i)
    back.push_back(0.5 * std::erfc(-y.at(i) / std::sqrt(2.0)));
  expectClose(make(f32, {64}, back), want, 1e-6, 1e-6, "ndtr(ndtri(p))");

  // PyTorch's edge values: poles, the ends of the domains, NaN.
  HostTensor edges = make(f32, {5}, {0.0, -1.0, 1.0, kNaN, -kInf});
  ASSERT_OK(run("lgamma", {&edges}, edges.desc, &y));
  expectEqual(y, {kInf, kInf, 0.0, kNaN, kInf});
  ASSERT_OK(run("erfinv", {&edges}, edges.desc, &y));
  expectEqual(y, {0.0, -kInf, kInf, kNaN, kNaN});
  ASSERT_OK(run("bessel_y0", {&edges}, edges.desc, &y));
  EXPECT_EQ(y.at(0), -kInf);
  EXPECT_TRUE(std::isnan(y.at(1)));
  ASSERT_OK(run("modified_bessel_k1", {&edges}, edges.desc, &y));
  EXPECT_EQ(y.at(0), kInf);
  EXPECT_TRUE(std::isnan(y.at(1)));

  // digamma (polygamma n = 0): psi(1) = -gamma, psi(1/2) = -gamma - 2 ln 2,
  // -inf at +0, NaN at the negative integers; trigamma(1) = pi^2/6;
  // polygamma(3, 1) = 3! zeta(4) = pi^4/15.
  const double gamma = 0.57721566490153286;
  HostTensor x = make(f32, {4}, {1.0, 0.5, 0.0, -2.0});
  ASSERT_OK(run("polygamma", {&x}, x.desc, &y, attrs({{"n", I(0)}})));
  expectClose(y, {-gamma, -gamma - 2 * std::log(2.0), -kInf, kNaN}, 1e-6, 1e-6, "digamma");
  HostTensor one = make(f32, {1}, {1.0});
  ASSERT_OK(run("polygamma", {&one}, one.desc, &y, attrs({{"n", I(1)}})));
  expectClose(y, {M_PI * M_PI / 6}, 1e-6, 1e-6, "trigamma(1)");
  ASSERT_OK(run("polygamma", {&one}, one.desc, &y, attrs({{"n", I(3)}})));
  expectClose(y, {6 * std::riemann_zeta(4.0)}, 1e-6, 1e-6, "polygamma(3, 1)");

  // Airy Ai: Ai(0), Ai(1), Ai(-2), Ai(6) (decaying), Ai(-10) (oscillating).
  HostTensor a = make(f32, {5}, {0.0, 1.0, -2.0, 6.0, -10.0});
  ASSERT_OK(run("airy_ai", {&a}, a.desc, &y));
  expectClose(y, {0.35502805388781724, 0.13529241631288141, 0.22740742820168557,
                  9.947694360252897e-06, 0.04024123848644196},
              1e-6, 1e-5, "airy_ai");
}

TEST_P(KernelTest, SpecialBinaryMatchReferences) {
  // zeta(s, 1) is Riemann's zeta; zeta(s, 2) = zeta(s) - 1.
  HostTensor s = make(f32, {4}, {2.0, 3.0, 4.5, 1.5}), q = make(f32, {2, 1}, {1.0, 2.0}), y;
  ASSERT_OK(run("zeta", {&s, &q}, D(f32, {2, 4}), &y));
  std::vector<double> want;
  for (double shift : {0.0, 1.0})
    for (double v : {2.0, 3.0, 4.5, 1.5})
      want.push_back(std::riemann_zeta(v) - shift);
  expectClose(y, want, 1e-6, 1e-6, "zeta");

  // P(1, x) = 1 - e^-x, P(1/2, x) = erf(sqrt x); Q = 1 - P.
  HostTensor a = make(f32, {2, 1}, {1.0, 0.5}), x = make(f32, {5}, {0.1, 0.9, 2.0, 7.0, 30.0});
  ASSERT_OK(run("igamma", {&a, &x}, D(f32, {2, 5}), &y));
  want.clear();
  for (double av : {1.0, 0.5})
    for (double xv : {0.1, 0.9, 2.0, 7.0, 30.0})
      want.push_back(av == 1.0 ? -std::expm1(-xv) : std::erf(std::sqrt(xv)));
  expectClose(y, want, 1e-6, 1e-6, "igamma");
  HostTensor yc;
  ASSERT_OK(run("igammac", {&a, &x}, D(f32, {2, 5}), &yc));
  for (double &w : want)
    w = 1 - w;
  expectClose(yc, want, 1e-6, 1e-5, "igammac");

  // Hermite (physicists'), Laguerre and Legendre against libstdc++, a
  // degree that truncates (3.7 is 3), and a negative degree (0).
  HostTensor px = random({7, 1}, 0, 1); // std::laguerre throws below 0
  HostTensor n = make(f32, {5}, {0.0, 1.0, 3.7, 6.0, -2.0});
  struct PolyCase {
    const char *family;
    std::function<double(unsigned, double)> ref;
  };
  for (const PolyCase &c : std::vector<PolyCase>{
           {"hermite_h", [](unsigned k, double v) { return std::hermite(k, v); }},
           {"laguerre_l", [](unsigned k, double v) { return std::laguerre(k, v); }},
           {"legendre_p", [](unsigned k, double v) { return std::legendre(k, v); }},
           {"chebyshev_t", [](unsigned k, double v) { return std::cos(k * std::acos(v)); }}}) {
    ASSERT_OK(run("orthogonal_polynomial", {&px, &n}, D(f32, {7, 5}), &y,
                  attrs({{"family", S(c.family)}})));
    want.clear();
    for (double v : px.values())
      for (double k : {0.0, 1.0, 3.7, 6.0, -2.0})
        want.push_back(k < 0 ? 0.0 : c.ref(static_cast<unsigned>(k), static_cast<float>(v)));
    expectClose(y, want, 2e-6, 2e-5, c.family);
  }
  expectError(sig("orthogonal_polynomial", {D(f32, {2}), D(f32, {2})}, D(f32, {2}),
                  attrs({{"family", S("jacobi_p")}})),
              {"jacobi_p"});
  expectError(sig("polygamma", {D(f32, {2})}, D(f32, {2}), attrs({{"n", I(-1)}})), {"-1"});
}

TEST_P(KernelTest, NextafterGcdLcm) {
  HostTensor a = make(f32, {4}, {1.0, 1.0, 0.0, kNaN}), b = make(f32, {4}, {2.0, 0.0, -1.0, 1.0});
  HostTensor y;
  ASSERT_OK(run("nextafter", {&a, &b}, a.desc, &y));
  expectEqual(y, {std::nextafter(1.0f, 2.0f), std::nextafter(1.0f, 0.0f),
                  std::nextafter(0.0f, -1.0f), kNaN});
  for (DType t : {i64, i32}) {
    HostTensor x = make(t, {5}, {12, -18, 0, 0, 7}), z = make(t, {5}, {18, 12, 5, 0, -3});
    ASSERT_OK(run("gcd", {&x, &z}, x.desc, &y));
    expectEqual(y, {6, 6, 5, 0, 1});
    ASSERT_OK(run("lcm", {&x, &z}, x.desc, &y));
    expectEqual(y, {36, 36, 0, 0, 21});
  }
  expectError(sig("gcd", {D(f32, {2}), D(f32, {2})}, D(f32, {2})), {"gcd"});
}

TEST_P(KernelTest, FrexpSplitsMantissaAndExponent) {
  const float tiny = 3.0e-40f; // subnormal
  int tinyExponent = 0;
  const double tinyMantissa = std::frexp(tiny, &tinyExponent);
  HostTensor x = make(f32, {5}, {8.0, -0.375, 0.0, kInf, tiny});
  KernelSignature s = sig("frexp", {x.desc}, D(f32, {5}));
  s.outputs.push_back(D(i32, {5}));
  std::vector<HostTensor> outs;
  ASSERT_OK(runAll(s, {&x}, &outs));
  expectEqual(outs[0], {0.5, -0.75, 0.0, kInf, tinyMantissa});
  expectEqual(outs[1], {4, -1, 0, 0, double(tinyExponent)});
  s.outputs[1] = D(i64, {5});
  expectError(s, {"frexp"});
}

// The CPU's widening path, bit for bit; the CUDA kernels compute bf16 their
// own way (tensor cores) and are checked by their own tolerances.
INSTANTIATE_TEST_SUITE_P(Backends, Bf16KernelTest, ::testing::Values(std::string("cpu")),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

INSTANTIATE_TEST_SUITE_P(Backends, KernelTest,
                         ::testing::Values(std::string("cpu"), std::string("cuda")),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

} // namespace
