# lit configuration for cleave's IR, pass and importer tests.
import os

import lit.formats

config.name = "cleave"
# External bash: importer tests record exit codes with `;` and `$?`.
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.cleave_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"
# LibTorch and OpenBLAS would start a thread pool per test: keep tests light
# on the 2-core machines.
config.environment["OMP_NUM_THREADS"] = "1"
config.environment["OPENBLAS_NUM_THREADS"] = "1"

# Exports use Debian's Python, which has PyTorch (the first python3 on PATH
# may be another interpreter without it).
python = "/usr/bin/python3"
config.substitutions.append(("%python", python))
config.substitutions.append(("%export", f"{python} {config.cleave_src_root}/examples/export.py"))

config.environment["PATH"] = os.pathsep.join(
    [config.cleave_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])

# An NVIDIA GPU with its driver: tests of the CUDA backend need one; tests of
# what happens without one are unsupported there.
if os.path.exists("/dev/nvidiactl"):
    config.available_features.add("cuda-gpu")
    if os.path.exists("/dev/nvidia1"):
        config.available_features.add("cuda-gpus-2")
