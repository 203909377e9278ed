# Sourced by the scripts that run the bundle on the GPU machine
# (gpu-check.sh, gpu/sanitize.sh): cuDNN and NCCL are the system's, else the
# ones PyTorch's wheels carry, put on LD_LIBRARY_PATH.
for lib in libcudnn.so.9 libnccl.so.2; do
  if ! ldconfig -p 2>/dev/null | grep -q "$lib"; then
    found=$(find / -xdev -name "$lib" -path '*site-packages*' 2>/dev/null | head -1)
    [ -n "$found" ] && export LD_LIBRARY_PATH=$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
done
