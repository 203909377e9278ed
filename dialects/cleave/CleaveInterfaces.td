//===- CleaveInterfaces.td - what passes ask of cleave ops -*- tablegen -*-===//
//
// Knowledge that passes need about each op lives here, on the ops, with
// defaults that fit most of them; an op overrides only what differs.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_INTERFACES_TD
#define CLEAVE_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Cleave_ExecutableOpInterface : OpInterface<"ExecutableOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    How an op executes in a plan: whether its result is a view of an operand's
    buffer (no kernel, no new memory), how much arena scratch its kernel needs,
    and which attributes its kernel reads. Memory planning and plan emission
    ask these questions; they never switch on op names.
  }];
  let methods = [
    InterfaceMethod<[{
        Index of the operand whose buffer the result reuses unchanged (same
        bytes, another shape), or std::nullopt when the op computes a new
        buffer.
      }], "std::optional<unsigned>", "getViewedOperand", (ins), [{}],
      [{ return std::nullopt; }]>,
    InterfaceMethod<[{
        Bytes of arena scratch the CPU kernel needs while it runs.
      }], "int64_t", "getScratchBytes", (ins), [{}], [{ return 0; }]>,
    InterfaceMethod<[{
        The attributes the kernel reads, enums spelled as strings.
      }], "::llvm::SmallVector<::mlir::NamedAttribute>", "getKernelAttributes",
      (ins), [{}],
      [{ return ::mlir::cleave::getDefaultKernelAttributes($_op); }]>,
  ];
}

#endif // CLEAVE_INTERFACES_TD
