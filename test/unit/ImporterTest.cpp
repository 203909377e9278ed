//===- ImporterTest.cpp - TorchScript import from C++-defined modules -----===//
//
// Each test defines a TorchScript module with LibTorch's C++ API, saves it,
// and imports the file, so the importer is exercised without Python.
//
//===----------------------------------------------------------------------===//

#include "compiler/Importer.h"
#include "dialects/cleave/CleaveDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"

#include <gtest/gtest.h>
#include <torch/csrc/jit/passes/subgraph_rewrite.h>
#include <torch/script.h>

#include <dlfcn.h>

#include <cstdio>
#include <unistd.h>

using namespace mlir;

namespace {

class ImporterTest : public ::testing::Test {
protected:
  ImporterTest() {
    handler = context.getDiagEngine().registerHandler([this](Diagnostic &diag) {
      errors += diag.str() + "\n";
      return success();
    });
    char dir[] = "/tmp/cleave-importer-test-XXXXXX";
    tempDir = mkdtemp(dir);
  }
  ~ImporterTest() override {
    context.getDiagEngine().eraseHandler(handler);
    std::remove(path().c_str());
    rmdir(tempDir.c_str());
  }

  std::string path() const { return tempDir + "/model.pt"; }

  /// Saves `module` and imports it with the given input shapes.
  FailureOr<::cleave::ImportedModel> import(torch::jit::Module &module,
                                          std::vector<::cleave::InputSpec> shapes,
                                          ::cleave::ImportFailure *kind = nullptr,
                                          bool training = false) {
    module.save(path());
    ::cleave::ImportOptions options;
    options.inputShapes = std::move(shapes);
    options.training = training;
    return ::cleave::importTorchScript(context, path(), options, kind);
  }

  template <typename OpTy>
  int count(::cleave::ImportedModel &model) {
    int n = 0;
    model.module->walk([&](OpTy) { ++n; });
    return n;
  }

  MLIRContext context;
  DiagnosticEngine::HandlerID handler;
  std::string errors;
  std::string tempDir;
};

TEST_F(ImporterTest, ParameterDataStaysAvailable) {
  torch::jit::Module fc("Fc");
  at::Tensor weight = torch::arange(12, torch::kFloat).reshape({3, 4});
  fc.register_parameter("weight", weight, false);
  fc.register_buffer("scale", torch::full({3}, 2.0));
  fc.define(R"(
def forward(self, x):
    return torch.linear(x, self.weight) * self.scale
)");
  auto model = import(fc, {{"x", {5, 4}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
  EXPECT_FALSE(model->meta);
  ASSERT_EQ(model->params.size(), 2u);
  const ::cleave::ParamData &w = model->params["weight"];
  EXPECT_EQ(w.shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(w.dtype, "f32");
  EXPECT_EQ(w.bytes, 48u);
  ASSERT_NE(w.data, nullptr);
  const float *values = static_cast<const float *>(w.data);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(values[i], float(i));
  EXPECT_EQ(count<mlir::cleave::LinearOp>(*model), 1);
  bool scaleIsBuffer = false;
  model->module->walk([&](mlir::cleave::ParamOp param) {
    if (param.getName() == "scale")
      scaleIsBuffer = param.getBuffer();
  });
  EXPECT_TRUE(scaleIsBuffer);
}

TEST_F(ImporterTest, TiedWeightsAreOneParam) {
  at::Tensor shared = torch::randn({8, 4});
  torch::jit::Module a("A"), b("B"), top("Top");
  a.register_parameter("weight", shared, false);
  b.register_parameter("weight", shared, false);
  for (auto *m : {&a, &b})
    m->define("def forward(self, x):\n    return torch.linear(x, self.weight)\n");
  top.register_module("enc", a);
  top.register_module("dec", b);
  top.define(R"(
def forward(self, x):
    return self.dec.forward(self.enc.forward(x).transpose(0, 1).contiguous().transpose(0, 1)[:, :4])
)");
  auto model = import(top, {{"x", {2, 4}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
  EXPECT_EQ(model->params.size(), 1u);
  EXPECT_TRUE(model->params.count("enc.weight"));
  EXPECT_EQ(count<mlir::cleave::ParamOp>(*model), 1);
  EXPECT_EQ(count<mlir::cleave::LinearOp>(*model), 2);
}

TEST_F(ImporterTest, ModuleScopesBecomeNameLocations) {
  torch::jit::Module inner("Inner"), top("Top");
  inner.register_parameter("weight", torch::randn({4, 4}), false);
  inner.define("def forward(self, x):\n    return torch.relu(torch.linear(x, self.weight))\n");
  top.register_module("block", inner);
  top.define("def forward(self, x):\n    return self.block.forward(x) + 1\n");
  auto model = import(top, {{"x", {2, 4}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
  model->module->walk([&](Operation *op) {
    if (isa<mlir::cleave::LinearOp, mlir::cleave::ReluOp>(op)) {
      auto loc = dyn_cast<NameLoc>(op->getLoc());
      ASSERT_TRUE(loc) << "op without a module scope";
      EXPECT_EQ(loc.getName().str(), "block");
    }
    if (isa<mlir::cleave::AddOp>(op)) {
      EXPECT_FALSE(isa<NameLoc>(op->getLoc())) << "the root's ops have no scope";
    }
  });
}

TEST_F(ImporterTest, IfOnStaticShapeFolds) {
  torch::jit::Module m("M");
  m.define(R"(
def forward(self, x):
    if x.dim() == 2:
        return x + 1
    else:
        return x - 1
)");
  auto model = import(m, {{"x", {2, 3}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
  EXPECT_EQ(count<mlir::cleave::AddOp>(*model), 1);
  EXPECT_EQ(count<mlir::cleave::SubOp>(*model), 0);
  // The other shape takes the other branch.
  auto other = import(m, {{"x", {2, 3, 4}, "f32"}});
  ASSERT_TRUE(succeeded(other)) << errors;
  EXPECT_EQ(count<mlir::cleave::SubOp>(*other), 1);
}

/// The value of each single-element f32 constant the model adds to its input.
std::vector<float> addedConstants(::cleave::ImportedModel &model) {
  std::vector<float> values;
  model.module->walk([&](mlir::cleave::AddOp add) {
    for (mlir::Value operand : add->getOperands())
      if (auto constant = operand.getDefiningOp<mlir::cleave::ConstantOp>())
        if (auto dense = llvm::dyn_cast<mlir::DenseFPElementsAttr>(constant.getValue()))
          values.push_back(dense.getSplatValue<float>());
  });
  return values;
}

TEST_F(ImporterTest, ConstantsBuiltInForwardAreSharedUnlessWritten) {
  // Each "layer" builds ones(200, 200) (a splat bigger than what folds into
  // the IR element by element). The second is written in place, so it may
  // not be the first's: the third, built after the write, must still be
  // all ones.
  torch::jit::Module m("M");
  m.define(R"(
def forward(self, x):
    a = torch.ones(200, 200)
    y = x + a.sum()
    b = torch.ones(200, 200)
    b.mul_(2.0)
    y = y + b.sum()
    c = torch.ones(200, 200)
    return y + c.sum()
)");
  auto model = import(m, {{"x", {3}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
  EXPECT_EQ(addedConstants(*model), (std::vector<float>{40000.0f, 80000.0f, 40000.0f}));

  // The same op on the same tensor, before and after the tensor is written
  // in place, is two folds, not one.
  torch::jit::Module n("N");
  n.define(R"(
def forward(self, x):
    a = torch.ones(200, 200)
    y = x + (a * 2.0).sum()
    a.add_(1.0)
    return y + (a * 2.0).sum()
)");
  model = import(n, {{"x", {3}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
  EXPECT_EQ(addedConstants(*model), (std::vector<float>{80000.0f, 160000.0f}));
}

TEST_F(ImporterTest, ConstantTripCountLoopsUnroll) {
  torch::jit::Module m("M");
  m.define(R"(
def forward(self, x):
    for i in range(x.size(0) + 1):
        x = x * 2
    return x
)");
  auto model = import(m, {{"x", {3, 2}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
  EXPECT_EQ(count<mlir::cleave::MulOp>(*model), 4);
}

TEST_F(ImporterTest, DataDependentControlFlowIsAnError) {
  torch::jit::Module m("M");
  m.define(R"(
def forward(self, x):
    if bool(x.sum() > 0):
        return x * 2
    return x
)");
  ::cleave::ImportFailure kind = ::cleave::ImportFailure::BadInput;
  auto model = import(m, {{"x", {4}, "f32"}}, &kind);
  EXPECT_TRUE(failed(model));
  EXPECT_EQ(kind, ::cleave::ImportFailure::Unsupported);
  EXPECT_NE(errors.find("data-dependent control flow"), std::string::npos) << errors;
}

TEST_F(ImporterTest, AllUnsupportedOpsAreListed) {
  torch::jit::Module m("M");
  m.define(R"(
def forward(self, x):
    q, r = torch.qr(x)
    p, t = torch.qr(torch.relu(x))
    return torch.pinverse(q + p) + torch.matrix_exp(r + t)
)");
  ::cleave::ImportFailure kind = ::cleave::ImportFailure::BadInput;
  auto model = import(m, {{"x", {4, 4}, "f32"}}, &kind);
  EXPECT_TRUE(failed(model));
  EXPECT_EQ(kind, ::cleave::ImportFailure::Unsupported);
  EXPECT_NE(errors.find("3 unsupported op kinds (4 uses)"), std::string::npos) << errors;
  EXPECT_NE(errors.find("aten::qr"), std::string::npos) << errors;
  EXPECT_NE(errors.find("2 uses"), std::string::npos) << errors;
  EXPECT_NE(errors.find("aten::pinverse"), std::string::npos) << errors;
  EXPECT_NE(errors.find("aten::linalg_matrix_exp"), std::string::npos) << errors;
}

TEST_F(ImporterTest, MetaParametersHaveShapesButNoData) {
  torch::jit::Module m("M");
  m.register_parameter("weight", torch::empty({1000, 4000}, torch::kMeta), false);
  m.define("def forward(self, x):\n    return torch.linear(x, self.weight)\n");
  auto model = import(m, {{"x", {2, 4000}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
  EXPECT_TRUE(model->meta);
  const ::cleave::ParamData &w = model->params["weight"];
  EXPECT_EQ(w.data, nullptr);
  EXPECT_EQ(w.bytes, 16000000u);
}

TEST_F(ImporterTest, TypePromotionInsertsCasts) {
  torch::jit::Module m("M");
  m.define(R"(
def forward(self, ids, x):
    return x * ids + 0.5
)");
  auto model = import(m, {{"ids", {2, 3}, "i64"}, {"x", {3}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
  EXPECT_EQ(count<mlir::cleave::CastOp>(*model), 1);
  auto func = *model->module->getOps<func::FuncOp>().begin();
  EXPECT_EQ(func.getResultTypes()[0],
            RankedTensorType::get({2, 3}, Float32Type::get(&context)));
}

TEST_F(ImporterTest, MissingInputShapeNamesTheInput) {
  torch::jit::Module m("M");
  m.define("def forward(self, tokens):\n    return tokens * 2\n");
  ::cleave::ImportFailure kind = ::cleave::ImportFailure::Unsupported;
  auto model = import(m, {}, &kind);
  EXPECT_TRUE(failed(model));
  EXPECT_EQ(kind, ::cleave::ImportFailure::BadInput);
  EXPECT_NE(errors.find("input 'tokens' has no shape"), std::string::npos) << errors;
}

/// A module with a counter buffer that forward increments in place, as a
/// batch norm in training mode does with num_batches_tracked.
torch::jit::Module counting(int increments) {
  torch::jit::Module m("Counting");
  m.register_parameter("weight", torch::randn({3, 3}), false);
  m.register_buffer("num_batches_tracked", torch::tensor(int64_t(5)));
  std::string body = "def forward(self, x):\n";
  for (int i = 0; i < increments; ++i)
    body += "    self.num_batches_tracked.add_(1)\n";
  body += "    return torch.linear(x, self.weight)\n";
  m.define(body);
  return m;
}

TEST_F(ImporterTest, InPlaceBufferUpdatesAreDroppedForInference) {
  auto m = counting(1);
  auto model = import(m, {{"x", {2, 3}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
  EXPECT_EQ(count<mlir::cleave::AssignOp>(*model), 0);
}

TEST_F(ImporterTest, InPlaceBufferUpdatesAreAssignedForTraining) {
  auto m = counting(2);
  auto model = import(m, {{"x", {2, 3}, "f32"}}, nullptr, /*training=*/true);
  ASSERT_TRUE(succeeded(model)) << errors;
  // Two increments, one write of the final value: assign(n, (n + 1) + 1).
  mlir::cleave::AssignOp assign;
  int assigns = 0;
  model->module->walk([&](mlir::cleave::AssignOp op) {
    assign = op;
    ++assigns;
  });
  ASSERT_EQ(assigns, 1);
  auto target = assign.getTarget().getDefiningOp<mlir::cleave::ParamOp>();
  ASSERT_TRUE(target);
  EXPECT_EQ(target.getName(), "num_batches_tracked");
  auto second = assign.getValue().getDefiningOp<mlir::cleave::AddOp>();
  ASSERT_TRUE(second);
  auto first = second.getLhs().getDefiningOp<mlir::cleave::AddOp>();
  ASSERT_TRUE(first);
  EXPECT_EQ(first.getLhs(), assign.getTarget());
}

TEST_F(ImporterTest, InPlaceUpdateOfATrainedParameterIsAnErrorInTraining) {
  torch::jit::Module m("M");
  m.register_parameter("weight", torch::randn({3}), false);
  m.define("def forward(self, x):\n    self.weight.mul_(2)\n    return x * self.weight\n");
  auto model = import(m, {{"x", {3}, "f32"}}, nullptr, /*training=*/true);
  EXPECT_TRUE(failed(model));
  EXPECT_NE(errors.find("updates the parameter 'weight' in place"), std::string::npos) << errors;
}

TEST_F(ImporterTest, FrozenParametersAreMarked) {
  torch::jit::Module m("M");
  // LibTorch's C++ tensors do not require grad unless asked; nn.Parameter's do.
  m.register_parameter("weight", torch::randn({3, 3}).requires_grad_(true), false);
  m.register_parameter("bias", torch::randn({3}), false);
  m.define("def forward(self, x):\n    return torch.linear(x, self.weight, self.bias)\n");
  auto model = import(m, {{"x", {2, 3}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
  std::map<std::string, bool> frozen;
  model->module->walk([&](mlir::cleave::ParamOp param) {
    frozen[param.getName().str()] = param->hasAttr("frozen");
  });
  EXPECT_EQ(frozen, (std::map<std::string, bool>{{"weight", false}, {"bias", true}}));
}

TEST_F(ImporterTest, StateDictListsEveryEntryInOrder) {
  at::Tensor shared = torch::randn({8, 4});
  torch::jit::Module enc("Enc"), dec("Dec"), top("Top");
  enc.register_parameter("weight", shared, false);
  enc.register_buffer("mask", torch::ones({4}));
  enc.define("def forward(self, x):\n    return torch.linear(x, self.weight)\n");
  dec.register_parameter("weight", shared, false);
  dec.register_parameter("bias", torch::zeros({8}), false);
  dec.define("def forward(self, x):\n    return torch.linear(x, self.weight, self.bias)\n");
  top.register_buffer("scale", torch::full({1}, 2.0));
  top.register_module("enc", enc);
  top.register_module("dec", dec);
  top.define(R"(
def forward(self, x):
    return self.dec.forward(self.enc.forward(x)[:, :4]) * self.scale
)");
  auto model = import(top, {{"x", {2, 4}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
  // Each module's parameters, then its buffers, then its submodules; tied
  // entries name one param; enc.mask is never read.
  std::vector<std::pair<std::string, std::string>> entries;
  for (const ::cleave::StateDictItem &item : model->stateDict)
    entries.emplace_back(item.name, item.param);
  EXPECT_EQ(entries, (std::vector<std::pair<std::string, std::string>>{
                         {"scale", "scale"},
                         {"enc.weight", "enc.weight"},
                         {"enc.mask", ""},
                         {"dec.weight", "enc.weight"},
                         {"dec.bias", "dec.bias"}}));
  const ::cleave::ParamData &mask = model->stateDict[2].data;
  EXPECT_EQ(mask.shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(mask.dtype, "f32");
  ASSERT_NE(mask.data, nullptr);
  EXPECT_EQ(static_cast<const float *>(mask.data)[3], 1.0f);
}

// The importer's load skips LibTorch's rewrite of pre-1.6 quantized
// convolutions by interposing SubgraphRewriter::runOnModule
// (compiler/TorchLoad.cpp). The interposition must be the one the dynamic
// linker resolves, and outside the importer's load it must still rewrite.
TEST_F(ImporterTest, SubgraphRewritesOutsideTheImportersLoadStillApply) {
  void *resolved = dlsym(RTLD_DEFAULT, "_ZN5torch3jit16SubgraphRewriter11runOnModuleERKNS0_6ModuleE");
  ASSERT_NE(resolved, nullptr);
  Dl_info where{};
  ASSERT_NE(dladdr(resolved, &where), 0);
  EXPECT_EQ(std::string(where.dli_fname).find("libtorch"), std::string::npos)
      << "runOnModule resolves to " << where.dli_fname << ", not cleave's";

  torch::jit::Module inner("Inner"), top("Top");
  inner.define("def forward(self, x):\n    return torch.relu(x)\n");
  top.register_module("inner", inner);
  top.define("def forward(self, x):\n    return torch.relu(self.inner.forward(x))\n");
  torch::jit::SubgraphRewriter rewriter;
  rewriter.RegisterRewritePattern(R"(
graph(%x):
  %y = aten::relu(%x)
  return (%y))",
                                  R"(
graph(%x):
  %y = aten::sigmoid(%x)
  return (%y))");
  rewriter.runOnModule(top);
  auto kinds = [](const torch::jit::Module &m) {
    std::string text = m.get_method("forward").graph()->toString();
    return std::make_pair(text.find("aten::sigmoid") != std::string::npos,
                          text.find("aten::relu") != std::string::npos);
  };
  EXPECT_EQ(kinds(top), std::make_pair(true, false));
  // Like LibTorch's, it rewrites the module's own methods, not its children's.
  EXPECT_EQ(kinds(top.attr("inner").toModule()), std::make_pair(false, true));

  // And a saved module still imports through the load that skips it.
  auto model = import(top, {{"x", {2, 3}, "f32"}});
  ASSERT_TRUE(succeeded(model)) << errors;
}

} // namespace
