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
# The references' rounding must not depend on the machine's CPU: OpenBLAS picks
# AVX-512 GEMM kernels where it can, which round otherwise than its AVX2 ones,
# and the training tests run where one ReLU input sits within rounding of zero
# by step 9 (docs/training.md, "How close to PyTorch"): PyTorch with AVX-512
# kernels parts from PyTorch with AVX2 kernels there by 2e-4. Every machine
# these tests run on has AVX2.
config.environment["OPENBLAS_CORETYPE"] = "Haswell"

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

config.substitutions.append(("%cleave_build", config.cleave_obj_root))


def bare_chroot_unsupported():
    """Why test/run/bundle.test cannot make its bare Debian chroot here, or
    None: it needs root (with the capabilities to chroot, mknod and mount),
    debootstrap, patchelf, chroot and Open MPI, and,
    unless the chroot is already cached under the build directory, a
    reachable mirror (the first of this machine's apt sources)."""
    import shutil
    import socket
    import urllib.parse

    if os.geteuid() != 0:
        return "not root"
    # chroot, mknod (debootstrap) and mount (/proc in the chroot).
    caps = 0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapEff:"):
                caps = int(line.split()[1], 16)
    for bit, name in ((18, "CAP_SYS_CHROOT"), (21, "CAP_SYS_ADMIN"), (27, "CAP_MKNOD")):
        if not caps >> bit & 1:
            return f"no {name}"
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    for tool in ("debootstrap", "patchelf", "chroot", "orterun"):
        if not shutil.which(tool, path=path):
            return f"{tool} is not installed"
    cache = os.path.join(config.cleave_obj_root, "bare-chroot", ".cleave-bare-chroot-ok")
    if os.path.exists(cache):
        return None
    hosts = []
    for name in ["/etc/apt/sources.list"] + sorted(
            os.path.join("/etc/apt/sources.list.d", f)
            for f in (os.listdir("/etc/apt/sources.list.d")
                      if os.path.isdir("/etc/apt/sources.list.d") else [])):
        if not name.endswith((".list", ".sources")) or not os.path.isfile(name):
            continue
        for line in open(name, errors="replace"):
            if line.lstrip().startswith("#"):
                continue
            for word in line.split():
                if "://" in word:
                    hosts.append(urllib.parse.urlparse(word).hostname)
    for host in hosts[:1]:
        try:
            socket.create_connection((host, 80), timeout=3).close()
            return None
        except OSError:
            return "no network to the apt mirror"
    return "no apt mirror configured"


import shutil as _shutil
if _shutil.which("patchelf"):
    config.available_features.add("patchelf")

bare_chroot_reason = bare_chroot_unsupported()
if bare_chroot_reason is None:
    config.available_features.add("bare-chroot")
else:
    lit_config.note(f"test/run/bundle.test unsupported: {bare_chroot_reason}")
