//===- ModelSummary.cpp - ops, parameters and bytes per module ------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "dialects/cleave/Locations.h"
#include "passes/Passes.h"
#include "cost/Format.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

namespace mlir::cleave {
#define GEN_PASS_DEF_PRINTMODELSUMMARY
#include "passes/Passes.h.inc"

namespace {

using ::cleave::cost::humanBytes;
using ::cleave::cost::humanCount;

/// `blocks.3.attn.qkv` cut to `depth` components.
std::string truncatePath(llvm::StringRef path, unsigned depth) {
  if (path.empty())
    return "(root)";
  llvm::SmallVector<llvm::StringRef> parts;
  path.split(parts, '.');
  parts.resize(std::min<size_t>(parts.size(), depth));
  return llvm::join(parts, ".");
}

struct Row {
  int64_t ops = 0, params = 0, buffers = 0, bytes = 0;
};

struct PrintModelSummaryPass
    : impl::PrintModelSummaryBase<PrintModelSummaryPass> {
  using PrintModelSummaryBase::PrintModelSummaryBase;

  void runOnOperation() override {
    llvm::MapVector<std::string, Row, std::map<std::string, unsigned>> rows;
    Row total;
    getOperation().walk([&](Operation *op) {
      if (auto param = llvm::dyn_cast<ParamOp>(op)) {
        auto type = llvm::cast<RankedTensorType>(param.getType());
        int64_t elements = type.getNumElements();
        int64_t bytes = elements * std::max<int64_t>(
                                       1, type.getElementTypeBitWidth() / 8);
        // A param belongs to its module: `blocks.0.attn.qkv.weight` counts
        // for `blocks.0.attn.qkv`.
        llvm::StringRef owner = param.getName().rsplit('.').first;
        if (owner == param.getName())
          owner = "";
        for (Row *row : {&rows[truncatePath(owner, depth)], &total}) {
          (param.getBuffer() ? row->buffers : row->params) += elements;
          row->bytes += bytes;
        }
        return;
      }
      if (llvm::isa<ConstantOp>(op) || !llvm::isa<CleaveDialect>(op->getDialect()))
        return;
      rows[truncatePath(moduleScope(op->getLoc()), depth)].ops++;
      total.ops++;
    });

    auto &os = llvm::outs();
    auto line = [&](llvm::StringRef name, const Row &row) {
      os << llvm::formatv("{0,-32} {1,8} {2,12} {3,10} {4,12}\n", name, row.ops,
                          humanCount(row.params), humanCount(row.buffers),
                          humanBytes(row.bytes));
    };
    os << llvm::formatv("{0,-32} {1,8} {2,12} {3,10} {4,12}\n", "module", "ops",
                        "params", "buffers", "bytes");
    for (auto &[name, row] : rows)
      line(name, row);
    line("total", total);
    os << llvm::formatv("total parameters: {0}, parameter and buffer bytes: {1}\n",
                        total.params, total.bytes);
  }
};

} // namespace
} // namespace mlir::cleave
