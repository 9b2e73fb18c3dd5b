"""Make llm-compressor checkpoints of a study model's reference weights, once, and cache them.

llm-compressor 0.14 caps transformers at 5.17, below flatscore's, so it runs in a separate
environment (`make quant-env`: `.venv-quant`, or the interpreter in `$FLATSCORE_QUANT_PYTHON`)
as a child process (`llmcompressor_job.py`). This side materializes the reference (the model
with its adapter merged, saved as safetensors and hashed), tokenizes the calibration
transcripts (oracle episodes of the train split of the built-in domains in the agent's own
chat format: `flatscore.train.calibration`), and keeps each checkpoint under the user cache
keyed by the reference's hash, the recipe, its calibration and the library pins
(`recipes.checkpoint_key`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from flatscore.episode import Checkpoint
from flatscore.errors import InputError
from flatscore.models.quant.calibration import Conversation
from flatscore.models.quant.recipes import (
    CALIBRATION_SAMPLES,
    LIBRARIES,
    MAX_SEQUENCE_LENGTH,
    Recipe,
    checkpoint_key,
)
from flatscore.registry import Registry

CALIBRATION_SOURCES: Registry[list[Conversation]] = Registry(
    "calibration source", builtins="flatscore.train.calibration", cached=True
)
"""Calibration transcripts by name; `train-split` (flatscore.train.calibration) is the one
every recipe uses."""
CALIBRATION = "train-split"
QUANT_PYTHON_ENV = "FLATSCORE_QUANT_PYTHON"
QUANT_VENV = ".venv-quant"
MANIFEST = "flatscore-checkpoint.json"
JOB_SCRIPT = Path(__file__).with_name("llmcompressor_job.py")


class MakeStep(BaseModel):
    """A step of making a checkpoint, for the caller to show (`flatscore arms make` words it):
    tokenizing the calibration transcripts, running the recipe in the quantization
    environment, or finding that environment's libraries other than the pins."""

    step: Literal["tokenizing", "running", "other_libraries"]
    recipe: str
    python: str | None = None
    """running: the quantization environment's interpreter."""
    libraries: dict[str, str] = {}
    """other_libraries: the versions the environment has."""
    pinned: dict[str, str] = {}
    """other_libraries: the versions pinned (`recipes.LIBRARIES`)."""


def quant_python() -> Path | None:
    """The quantization environment's interpreter: `$FLATSCORE_QUANT_PYTHON`, else
    `.venv-quant/bin/python` in the working directory or the source checkout's root."""
    env = os.environ.get(QUANT_PYTHON_ENV)
    if env:
        return Path(env) if Path(env).is_file() else None
    roots = [Path.cwd(), Path(__file__).resolve().parents[4]]
    for root in roots:
        candidate = root / QUANT_VENV / "bin" / "python"
        if candidate.is_file():
            return candidate
    return None


def checkpoints_dir() -> Path:
    from flatscore.models.embedded import cache_dir

    return cache_dir() / "checkpoints"


def state_sha256(model: Any) -> str:
    """A hash of every tensor of the model's state dict (names, shapes, dtypes, bytes)."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().contiguous().cpu()
        h.update(f"{name}|{tuple(t.shape)}|{t.dtype}|".encode())
        h.update(t.view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return h.hexdigest()


@cache
def reference_checkpoint(model: str = "embedded", adapter: str | None = None) -> tuple[Path, str]:
    """The reference weights (`model` with `adapter`, or the shipped one, merged) saved as a
    Hugging Face folder under the cache, and their hash; saved once per hash, loaded and
    hashed once per process."""
    from flatscore.models.embedded import load_model

    loaded = load_model(model, adapter)
    digest = state_sha256(loaded.model)
    target = checkpoints_dir() / "references" / digest[:24]
    if not (target / "config.json").is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        loaded.model.save_pretrained(tmp)
        loaded.tokenizer.save_pretrained(tmp)
        (tmp / "reference.json").write_text(
            json.dumps({"model": model, "adapter": adapter, "name": loaded.name, "sha256": digest})
        )
        _publish(tmp, target)
    return target, digest


def _publish(tmp: Path, target: Path) -> None:
    """Move a finished folder into place; another process's copy of the same key wins."""
    try:
        os.replace(tmp, target)
    except OSError:
        if not target.exists():
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def calibration_sequences(
    tokenizer: Any, count: int = CALIBRATION_SAMPLES, max_tokens: int = MAX_SEQUENCE_LENGTH
) -> list[list[int]]:
    """Token ids of the first `count` train-split agent transcripts (the `train-split`
    calibration source), rendered in the agent's chat format, each cut to its last
    `max_tokens` tokens (the turns; every transcript opens with the same system prompt)."""
    from flatscore.models.chat_format import encode_conversation, render

    out = []
    for conversation in CALIBRATION_SOURCES.make(CALIBRATION)[:count]:
        text = render(conversation.messages, conversation.tools, add_generation_prompt=False).text
        out.append(list(encode_conversation(tokenizer, text)["input_ids"])[-max_tokens:])
    return out


def tokens_sha256(sequences: list[list[int]]) -> str:
    return hashlib.sha256(json.dumps(sequences).encode()).hexdigest()


def cached_checkpoint(folder: Path) -> Checkpoint | None:
    """The manifest of a finished checkpoint folder (None: not made yet)."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return None
    return Checkpoint.model_validate_json(manifest.read_text())


def files_sha256(folder: Path) -> str:
    """A hash of a checkpoint's weight files (names and bytes, in name order)."""
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.safetensors")):
        h.update(path.name.encode())
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def make_checkpoint(
    recipe: Recipe,
    model: str = "embedded",
    adapter: str | None = None,
    *,
    on_step: Callable[[MakeStep], None] | None = None,
) -> Checkpoint:
    """The compressed-tensors checkpoint of `recipe` applied to `model` (+ `adapter`): made
    by llm-compressor in the quantization environment on first use, then read from the
    cache. `on_step(step)`: each step as it starts. InputError when the environment is
    missing or the recipe fails (the child's last lines)."""
    from transformers import AutoTokenizer

    say = on_step or (lambda step: None)
    reference, ref_sha = reference_checkpoint(model, adapter)
    sequences = None
    if recipe.calibrated:
        say(MakeStep(step="tokenizing", recipe=recipe.name))
        tokenizer = AutoTokenizer.from_pretrained(reference)
        sequences = calibration_sequences(tokenizer, recipe.samples, recipe.max_tokens)
    calibration_sha = tokens_sha256(sequences) if sequences is not None else None
    key = checkpoint_key(ref_sha, recipe, calibration_sha)
    folder = checkpoints_dir() / f"{recipe.name}-{key[:16]}"
    found = cached_checkpoint(folder)
    if found is not None:
        return found
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _building(folder):  # another process making the same checkpoint: wait for it
        found = cached_checkpoint(folder)
        if found is not None:
            return found
        return _make(recipe, reference, ref_sha, sequences, calibration_sha, folder, say)


@contextmanager
def _building(folder: Path) -> Iterator[None]:
    """An exclusive lock on `<folder>.lock` while the checkpoint is made."""
    import fcntl

    with folder.with_name(folder.name + ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _make(
    recipe: Recipe,
    reference: Path,
    ref_sha: str,
    sequences: list[list[int]] | None,
    calibration_sha: str | None,
    folder: Path,
    say: Callable[[MakeStep], None],
) -> Checkpoint:
    python = quant_python()
    if python is None:
        raise InputError(
            "llm-compressor recipes run in the quantization environment: `make quant-env` (or "
            f"set {QUANT_PYTHON_ENV} to a Python with llmcompressor=={LIBRARIES['llmcompressor']})",
            field="quant",
        )
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    job: dict[str, Any] = {
        "reference": str(reference),
        "out": str(tmp),
        "stage": recipe.stage(),
        "calibration": None,
        "max_sequence_length": recipe.max_tokens,
    }
    if sequences is not None:
        (tmp / "calibration.json").write_text(json.dumps(sequences))
        job["calibration"] = str(tmp / "calibration.json")
    (tmp / "job.json").write_text(json.dumps(job, indent=1))
    say(MakeStep(step="running", recipe=recipe.name, python=str(python)))
    start = time.perf_counter()
    log_file = tmp / "llmcompressor.log"
    with log_file.open("w") as out:
        done = subprocess.run(
            [str(python), str(JOB_SCRIPT), str(tmp / "job.json")],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp,
            env={**os.environ, "PYTHONPATH": "", "TOKENIZERS_PARALLELISM": "false"},
            check=False,
        )
    if done.returncode != 0:
        tail = " | ".join(log_file.read_text(errors="replace").strip().splitlines()[-3:])
        kept = folder.with_name(folder.name + ".failed")
        shutil.rmtree(kept, ignore_errors=True)
        os.replace(tmp, kept)
        raise InputError(
            f"llm-compressor recipe {recipe.name} failed (exit {done.returncode}; log "
            f"{kept / 'llmcompressor.log'}): {tail}",
            field="quant",
        )
    facts = json.loads((tmp / "toolchain.json").read_text())
    if {k: v.split("+")[0] for k, v in facts["libraries"].items()} != LIBRARIES:
        found = facts["libraries"]
        say(MakeStep(step="other_libraries", recipe=recipe.name, libraries=found, pinned=LIBRARIES))
    checkpoint = Checkpoint(
        recipe=recipe.name,
        stage=recipe.stage(),
        sha256=files_sha256(tmp),
        reference_sha256=ref_sha,
        calibration_sha256=calibration_sha,
        calibration_sequences=len(sequences) if sequences is not None else 0,
        libraries=facts["libraries"],
        seconds=round(time.perf_counter() - start, 1),
        path=str(folder),
    )
    (tmp / MANIFEST).write_text(checkpoint.model_dump_json(indent=1) + "\n")
    _publish(tmp, folder)
    return cached_checkpoint(folder) or checkpoint
