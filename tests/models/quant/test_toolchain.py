"""The checkpoint maker's parts that need no quantization environment: finding it, hashing
checkpoints, reading a finished checkpoint's manifest."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from flatscore.episode import Checkpoint
from flatscore.models.quant import toolchain
from flatscore.models.quant.toolchain import (
    MANIFEST,
    QUANT_PYTHON_ENV,
    cached_checkpoint,
    files_sha256,
    quant_python,
)


def test_the_environment_variable_names_the_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = tmp_path / "python"
    python.write_text("")
    monkeypatch.setenv(QUANT_PYTHON_ENV, str(python))
    assert quant_python() == python
    monkeypatch.setenv(QUANT_PYTHON_ENV, str(tmp_path / "missing"))
    assert quant_python() is None


def test_without_the_variable_the_venv_in_the_working_directory_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(QUANT_PYTHON_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    python = tmp_path / ".venv-quant" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert quant_python() == python


def test_the_checkpoint_hash_covers_every_weight_file_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "b.safetensors").write_bytes(b"bb")
    (tmp_path / "a.safetensors").write_bytes(b"a")
    (tmp_path / "config.json").write_text("{}")  # not a weight file
    expected = hashlib.sha256(b"a.safetensors" + b"a" + b"b.safetensors" + b"bb").hexdigest()
    assert files_sha256(tmp_path) == expected
    (tmp_path / "a.safetensors").write_bytes(b"A")
    assert files_sha256(tmp_path) != expected


def test_a_finished_checkpoint_is_read_from_its_manifest(tmp_path: Path) -> None:
    assert cached_checkpoint(tmp_path) is None
    made = Checkpoint(
        recipe="llmc-w8a8-fp8",
        stage={"quant_stage": {}},
        sha256="0" * 64,
        reference_sha256="1" * 64,
        libraries={"llmcompressor": "0.14.0.1"},
        path=str(tmp_path),
    )
    (tmp_path / MANIFEST).write_text(made.model_dump_json())
    assert cached_checkpoint(tmp_path) == made


def test_the_job_script_imports_nothing_of_flatscore() -> None:
    """It runs in the quantization environment, where flatscore is not installed."""
    source = toolchain.JOB_SCRIPT.read_text()
    assert "flatscore" not in "".join(
        line for line in source.splitlines() if line.lstrip().startswith(("import", "from"))
    )
