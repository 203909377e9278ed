//===- SharedConstantsTest.cpp - constants folded once, shared by layers --===//

#include "compiler/SharedConstants.h"

#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/torch.h>

#include <cmath>

namespace {

using namespace cleave::importer;

TEST(SharedConstantsTest, BigSplatsAreHeldInOneElement) {
  at::Tensor full = torch::full({300, 400}, 2.5);
  EXPECT_FALSE(isSplatView(full));
  EXPECT_TRUE(isSplat(full));
  at::Tensor compact = compactSplat(full);
  EXPECT_TRUE(isSplatView(compact));
  EXPECT_EQ(compact.sizes(), full.sizes());
  EXPECT_EQ(compact.scalar_type(), full.scalar_type());
  EXPECT_EQ(compact.storage().nbytes(), sizeof(float));
  EXPECT_TRUE(torch::equal(compact, full));

  EXPECT_FALSE(isSplat(torch::arange(5)));
  EXPECT_FALSE(isSplat(torch::empty({0, 3})));
  EXPECT_TRUE(isSplat(torch::ones({1})));
  EXPECT_FALSE(isSplatView(torch::ones({1})));
}

/// The first output of each node of `graph`, in order (parseIR renumbers
/// the names the text gives).
std::vector<const torch::jit::Value *> outputsInOrder(torch::jit::Graph &graph) {
  std::vector<const torch::jit::Value *> outputs;
  for (torch::jit::Node *node : graph.nodes())
    outputs.push_back(node->output(0));
  return outputs;
}

TEST(SharedConstantsTest, WritersThroughViewsAndListsAreSeen) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %r : Tensor = aten::relu(%x)
  %t : Tensor = aten::tril(%r, %zero)
  %v : Tensor = aten::select(%t, %zero, %zero)
  %w : Tensor = aten::relu_(%v)
  %l : Tensor[] = prim::ListConstruct(%r, %t)
  %c : Tensor = aten::cat(%l, %zero)
  %u : Tensor = aten::tril(%c, %zero)
  %m : Tensor[] = prim::ListConstruct(%u)
  %n : Tensor[] = aten::append(%m, %x)
  %one : int = prim::Constant[value=1]()
  %s : Tensor = aten::sigmoid(%x)
  %k : Tensor = aten::exp(%x)
  %o : Tensor = aten::add_(%k, %s, %one)
  return (%c)
)IR",
                         graph.get());
  auto values = outputsInOrder(*graph);
  ASSERT_EQ(values.size(), 14u);
  // add_ writes its first operand only; numbers are never written.
  EXPECT_FALSE(mayBeMutated(values[11]));
  EXPECT_TRUE(mayBeMutated(values[12]));
  EXPECT_FALSE(mayBeMutated(values[10]));
  const torch::jit::Value *r = values[1], *t = values[2], *v = values[3], *c = values[6],
                          *u = values[7];
  // Read by ops that make new tensors (tril, cat through a list): shareable.
  EXPECT_FALSE(mayBeMutated(r));
  // The graph's output is read, not written.
  EXPECT_FALSE(mayBeMutated(c));
  // relu_ writes into a view of %t, so into %t.
  EXPECT_TRUE(mayBeMutated(v));
  EXPECT_TRUE(mayBeMutated(t));
  // A list that is appended to.
  EXPECT_TRUE(mayBeMutated(u));
}

TEST(SharedConstantsTest, KeysNameInputsExactly) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %t : Tensor = aten::tril(%x, %zero)
  %f : float = prim::Constant[value=0.5]()
  %a : Tensor = aten::add(%x, %f, %zero)
  return (%t, %a)
)IR",
                         graph.get());
  auto values = outputsInOrder(*graph);
  ASSERT_EQ(values.size(), 4u);
  const torch::jit::Node *tril = values[1]->node(), *add = values[3]->node();
  at::Tensor a = torch::ones({3, 3}), b = torch::ones({3, 3});
  auto key = [](const torch::jit::Node *node, std::vector<c10::IValue> inputs) {
    auto k = foldKey(node, inputs);
    EXPECT_TRUE(k.has_value());
    return k.value_or("");
  };
  EXPECT_EQ(key(tril, {a, 0}), key(tril, {a, 0}));
  // Another tensor with the same values is another key: tensors by identity.
  EXPECT_NE(key(tril, {a, 0}), key(tril, {b, 0}));
  EXPECT_NE(key(tril, {a, 0}), key(tril, {a, 1}));
  // Numbers bit for bit: the next double after 0.5 differs.
  EXPECT_NE(key(add, {a, 0.5, 1}), key(add, {a, std::nextafter(0.5, 1.0), 1}));
  EXPECT_NE(key(add, {a, 0.5, 1}), key(add, {a, int64_t(1), 1}));
  // The operator is part of the key.
  EXPECT_NE(key(tril, {a, 0}), key(add, {a, 0}));
  // Lists and their nesting.
  EXPECT_NE(key(tril, {c10::List<int64_t>({1, 2}), int64_t(3)}),
            key(tril, {c10::List<int64_t>({1}), c10::List<int64_t>({2, 3})}));
  // What a key cannot name is never shared.
  EXPECT_FALSE(foldKey(tril, {c10::IValue(c10::complex<double>(1, 2))}).has_value());
}

} // namespace
