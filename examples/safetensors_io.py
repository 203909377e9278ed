"""Minimal safetensors reader/writer (the `safetensors` package is not installed here).

Format: 8-byte little-endian header length N, N bytes of JSON header
{name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...} with offsets relative
to the data section that follows, then the raw little-endian tensor bytes.
"""
import json
import os
import shutil
import struct
import sys
import tempfile
from typing import Callable, Dict

import torch

_DTYPES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}
_TORCH_DTYPES = {v: k for k, v in _DTYPES.items()}

# Tensor bytes are written as they lie in memory; the format is little-endian.
assert sys.byteorder == "little", "safetensors_io assumes a little-endian host"


def _tensor_bytes(t: torch.Tensor) -> bytes:
    # Viewing as uint8 covers every dtype, bf16 included, which numpy cannot represent.
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def atomic_write(path: str, write: Callable[[str], None]) -> None:
    """Calls write(tmp) and renames tmp over `path`, so readers never see a partial file. tmp has
    the same base name in a fresh folder beside `path`: torch.jit.save names the archive's root
    record after the file name, and a hidden temporary name would be rejected."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp_dir = tempfile.mkdtemp(dir=folder, prefix=".tmp-")
    try:
        tmp = os.path.join(tmp_dir, os.path.basename(path))
        write(tmp)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def save_file(tensors: Dict[str, torch.Tensor], path: str) -> None:
    """Writes `tensors` (in their dict order) to `path` atomically."""
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        if t.dtype not in _DTYPES:
            raise ValueError(f"safetensors: unsupported dtype {t.dtype} for tensor '{name}'")
        data = _tensor_bytes(t)
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # pad so the data section starts 8-byte aligned

    def write(tmp):
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(head)))
            f.write(head)
            for data in chunks:
                f.write(data)

    atomic_write(path, write)


def load_file(path: str) -> Dict[str, torch.Tensor]:
    """Reads every tensor of a safetensors file (in header order) onto the CPU."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        dtype = _TORCH_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: unsupported dtype {info['dtype']} for tensor '{name}'")
        begin, end = info["data_offsets"]
        if begin == end:
            out[name] = torch.empty(info["shape"], dtype=dtype)
        else:
            raw = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.uint8)
            out[name] = raw.view(dtype).reshape(info["shape"])
    return out
