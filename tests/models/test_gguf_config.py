"""The `gguf` model kind's configuration: every mistake in a study file is one line naming
the file and field (exit 2 from the CLI), and a missing llama-cpp-python names its extra.
No model is loaded here; tests/models/test_gguf.py runs real episodes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from flatscore.errors import InputError
from flatscore.models.gguf_files import (
    EXTRA_HINT,
    REFERENCE,
    check_gguf_file,
    file_info,
    quant_type,
    reference_file,
)
from flatscore.models.gguf_header import read_header
from flatscore.run.arm_backend import arm_backend
from flatscore.run.study import load_study


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data), "utf-8")
    return path


def gguf_model(**fields: object) -> dict[str, object]:
    return {"name": "smol", "kind": "gguf", "arms": ["ref"], **fields}


def fake_gguf(tmp_path: Path) -> Path:
    """A file with the GGUF magic bytes: enough for the file checks (never loaded)."""
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def test_quant_names_are_canonical() -> None:
    assert quant_type("q4_k_m") == "Q4_K_M"
    assert quant_type("Q8_0") == "Q8_0"
    assert quant_type("REF") == REFERENCE
    assert quant_type("int4") is None  # an in-process format, not a llama.cpp type
    assert quant_type("IQ2_XXS") is None  # needs an importance matrix: not offered


def test_the_embedded_file_is_the_q4_1_gguf() -> None:
    info = file_info(reference_file("embedded-base"))
    assert info.file_type == "Q4_1"
    assert info.tensor_types == {"Q4_1": 210, "F32": 61, "Q8_0": 1}
    assert info.context_length == 8192


def test_the_lean_header_reads_what_gguf_reader_reads() -> None:
    """`read_header` against gguf's own reader on the shipped file: every scalar and string
    field, and every tensor's type."""
    from collections import Counter

    from gguf import GGUFReader, GGUFValueType

    path = reference_file("embedded-base")
    reader = GGUFReader(path)
    header = read_header(path)
    scalars = {
        name: field.contents()
        for name, field in reader.fields.items()
        if field.types and field.types[0] != GGUFValueType.ARRAY and not name.startswith("GGUF.")
    }
    assert len(scalars) > 10 and header.fields == scalars
    assert header.tensor_types == Counter(t.tensor_type.name for t in reader.tensors)


def test_file_checks(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="GGUF file not found"):
        check_gguf_file(tmp_path / "missing.gguf")
    text = tmp_path / "notes.gguf"
    text.write_text("hello", "utf-8")
    with pytest.raises(InputError, match="not a GGUF file"):
        check_gguf_file(text)
    assert check_gguf_file(fake_gguf(tmp_path)) == tmp_path / "model.gguf"


def test_backend_of_each_arm(tmp_path: Path) -> None:
    own = fake_gguf(tmp_path)
    data = {
        "models": [
            gguf_model(
                path="embedded",
                threads=2,
                arms={
                    "ref": None,
                    "q8": {"quant": "q8_0"},
                    "Q4_0": None,
                    "own": {"file": str(own)},
                },
            )
        ]
    }
    try:
        study = load_study(write(tmp_path, data))
    except InputError as exc:  # the extra is checked last: only it may be missing here
        assert EXTRA_HINT in exc.message
        pytest.skip(f"llama-cpp-python is not installed ({EXTRA_HINT})")
    model = study.models[0]
    specs = {arm: arm_backend(model, arm) for arm in model.arms}
    assert {a: (s.kind, s.path, s.quant, s.threads) for a, s in specs.items() if s} == {
        "ref": ("gguf", "embedded", "ref", 2),
        "q8": ("gguf", "embedded", "q8_0", 2),
        "Q4_0": ("gguf", "embedded", "Q4_0", 2),
        "own": ("gguf", str(own), "ref", 2),
    }


@pytest.mark.parametrize(
    ("model", "field", "words"),
    [
        (gguf_model(path="TMP/missing.gguf"), "models.0.path", "GGUF file not found (TMP/"),
        (gguf_model(path="TMP/study.yaml"), "models.0.path", "not a GGUF file"),
        (gguf_model(arms=["q9_9"]), "models.0.arms.q9_9.(name)", "unknown GGUF quant type 'q9_9'"),
        (gguf_model(arms={"w": {"quant": "int4"}}), "models.0.arms.w.quant", "known: ref, F16"),
        (gguf_model(arms={"w": {"file": "TMP/nope.gguf"}}), "models.0.arms.w.file", "not found"),
        (
            gguf_model(arms={"w": {"file": "a.gguf", "quant": "Q8_0"}}),
            "models.0",
            "either file",
        ),
        (gguf_model(compute="bf16"), "models.0", "compute applies to embedded/local"),
        (
            {"name": "s", "kind": "local", "path": "x.gguf", "arms": {"w": {"file": "a.gguf"}}},
            "models.0",
            "file applies to kind gguf only",
        ),
        (
            {"name": "s", "kind": "ggml", "arms": ["ref"]},
            "models.0.kind",
            "unknown model kind 'ggml' (known: embedded, gguf",
        ),
    ],
)
def test_bad_gguf_models_name_file_and_field(
    tmp_path: Path, model: dict[str, object], field: str, words: str
) -> None:
    """Paths are as given (relative ones from the working directory, as for kind local)."""
    model = yaml.safe_load(yaml.safe_dump(model).replace("TMP/", f"{tmp_path}/"))
    path = write(tmp_path, {"models": [model]})
    with pytest.raises(InputError) as info:
        load_study(path)
    err = info.value
    assert (err.file, err.field) == (str(path), field)
    assert words.replace("TMP/", f"{tmp_path}/") in err.message
    assert "\n" not in err.one_line()


BLOCKED = (
    "import sys; sys.modules['llama_cpp'] = None; "  # what `import llama_cpp` sees uninstalled
    "from flatscore.cli import main; sys.argv[0] = 'flatscore'; main()"
)


def _run_without_llama_cpp(study: Path) -> subprocess.CompletedProcess[str]:
    """`flatscore run STUDY` in a fresh interpreter that cannot import llama_cpp."""
    return subprocess.run(
        [sys.executable, "-c", BLOCKED, "run", str(study)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_without_the_extra_the_cli_names_it_and_exits_2(tmp_path: Path) -> None:
    study = write(tmp_path, {"models": [gguf_model()], "domains": ["retail"]})
    done = _run_without_llama_cpp(study)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "field 'models.0.kind'" in lines[0] and "flatscore[gguf]" in lines[0]


def test_a_missing_file_through_the_cli_is_one_line_exit_2(tmp_path: Path) -> None:
    gone = tmp_path / "gone.gguf"
    study = write(tmp_path, {"models": [gguf_model(path=str(gone))], "domains": ["retail"]})
    done = _run_without_llama_cpp(study)
    assert done.returncode == 2, done.stderr
    expected = f"error: {study}, field 'models.0.path': GGUF file not found ({gone})"
    assert done.stderr.strip() == expected
