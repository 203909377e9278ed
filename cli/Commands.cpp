//===- Commands.cpp - helpers shared by the subcommands -------------------===//

#include "cli/Commands.h"
#include "runtime/AtomicFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <cerrno>
#include <cstring>
#include <sys/resource.h>
#include <unistd.h>

namespace cleave {

bool writeAtomically(const std::string &path,
                     llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::string text;
  llvm::raw_string_ostream os(text);
  write(os);
  runtime::Status status = runtime::writeFileAtomically(path, os.str());
  if (!status.ok())
    llvm::errs() << "cleave: error: " << status.message() << "\n";
  return status.ok();
}

int runTrainTool(int argc, char **argv) {
  std::string self = selfPath();
  std::string tool = self.substr(0, self.rfind('/') + 1) + "cleave-runtime";
  std::vector<char *> args = {tool.data(), const_cast<char *>("train")};
  for (int i = 0; i < argc; ++i)
    args.push_back(argv[i]);
  args.push_back(nullptr);
  llvm::outs().flush();
  llvm::errs().flush();
  execv(tool.c_str(), args.data());
  llvm::errs() << "cleave: error: cannot start " << tool << " (cleave train runs it): "
               << std::strerror(errno) << "; build it with the rest of cleave\n";
  return 1;
}

int addInputShape(const char *value, std::vector<InputSpec> &shapes, const char *usage) {
  if (!value)
    return usageError("--input-shape needs a value NAME=DIMS[:DTYPE]", usage);
  std::string error;
  std::optional<InputSpec> spec = parseInputSpec(value, error);
  if (!spec)
    return usageError(error, usage);
  shapes.push_back(*spec);
  return -1;
}

int setExampleInputs(const char *value, std::string &path, const char *usage) {
  if (!value || !*value)
    return usageError("--example-inputs needs a safetensors file", usage);
  if (!path.empty())
    return usageError("--example-inputs given twice", usage);
  path = value;
  return -1;
}

int takeModelArgument(const std::string &arg, std::string &model, const char *usage) {
  if (!arg.empty() && arg[0] == '-')
    return usageError("unknown option '" + arg + "'", usage);
  if (!model.empty())
    return usageError("more than one model given ('" + model + "', '" + arg + "')", usage);
  model = arg;
  return -1;
}


} // namespace cleave
