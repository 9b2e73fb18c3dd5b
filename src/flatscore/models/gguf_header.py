"""A GGUF file's header read lean: its key-value pairs (arrays skipped) and each tensor's type.

Why not `gguf.GGUFReader`: it builds a numpy view for every part of every field, the
tokenizer's ~49k vocabulary strings included, which takes seconds of CPU per file (3-4 s for
SmolLM2 on this machine); every `gguf` arm reads its file's header once per process that
loads it (the study and each `flatscore serve`). The types and value layout are gguf's own
(`GGUFValueType`, `GGMLQuantizationType`); tests/models/test_gguf_config.py checks the
result against `GGUFReader` on the shipped file.
"""

from __future__ import annotations

import mmap
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import GGMLQuantizationType, GGUFValueType

_SCALAR = {
    GGUFValueType.UINT8: "<B",
    GGUFValueType.INT8: "<b",
    GGUFValueType.UINT16: "<H",
    GGUFValueType.INT16: "<h",
    GGUFValueType.UINT32: "<I",
    GGUFValueType.INT32: "<i",
    GGUFValueType.FLOAT32: "<f",
    GGUFValueType.BOOL: "<?",
    GGUFValueType.UINT64: "<Q",
    GGUFValueType.INT64: "<q",
    GGUFValueType.FLOAT64: "<d",
}


@dataclass(frozen=True)
class Header:
    """Scalar and string values by key (arrays are left out), and tensor counts by type name."""

    fields: dict[str, Any]
    tensor_types: Counter[str]


class _Cursor:
    def __init__(self, buf: mmap.mmap) -> None:
        self.buf, self.at = buf, 0

    def unpack(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.buf, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.unpack("<Q")
        self.at += n
        return bytes(self.buf[self.at - n : self.at]).decode("utf-8", errors="replace")

    def value(self, kind: GGUFValueType) -> Any:
        if kind == GGUFValueType.STRING:
            return self.string()
        if kind == GGUFValueType.ARRAY:
            item, count = GGUFValueType(self.unpack("<I")), self.unpack("<Q")
            if item in _SCALAR:
                self.at += count * struct.calcsize(_SCALAR[item])
            else:
                for _ in range(count):
                    self.value(item)
            return None
        return self.unpack(_SCALAR[kind])


def read_header(path: Path) -> Header:
    """The header of the GGUF file at `path` (version 2 or 3: 64-bit counts)."""
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        cur = _Cursor(buf)
        if bytes(buf[:4]) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        cur.at = 4
        version = cur.unpack("<I")
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is not supported")
        n_tensors, n_fields = cur.unpack("<Q"), cur.unpack("<Q")
        fields: dict[str, Any] = {}
        for _ in range(n_fields):
            key = cur.string()
            value = cur.value(GGUFValueType(cur.unpack("<I")))
            if value is not None:
                fields[key] = value
        types: Counter[str] = Counter()
        for _ in range(n_tensors):
            cur.string()  # name
            n_dims = cur.unpack("<I")
            cur.at += 8 * n_dims  # dimensions
            types[GGMLQuantizationType(cur.unpack("<I")).name] += 1
            cur.at += 8  # offset
        return Header(fields=fields, tensor_types=types)
