"""The public API (docs/api.md): every documented name imports, and every Python example in
the docs imports only public names."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import flatscore

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_PACKAGES = (
    "flatscore",
    "flatscore.analysis",
    "flatscore.formats",
    "flatscore.report",
    "flatscore.study",
    "flatscore.models",
    "flatscore.models.quant",
    "flatscore.agents",
    "flatscore.users",
    "flatscore.domains",
)
API_PAGE = (ROOT / "docs" / "api.md").read_text("utf-8")


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_every_public_name_imports(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__all__, package
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"


def test_the_root_names_are_on_the_api_page_and_typed() -> None:
    names = [n for n in flatscore.__all__ if n != "__version__"]
    missing = [n for n in names if f"`{n}" not in API_PAGE]
    assert not missing, f"not on docs/api.md: {missing}"
    stub = ast.parse((ROOT / "src" / "flatscore" / "__init__.pyi").read_text("utf-8"))
    typed = {a.asname for node in stub.body if isinstance(node, ast.ImportFrom) for a in node.names}
    assert typed == set(names), "src/flatscore/__init__.pyi and __all__ disagree"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'analyse'"):
        _ = flatscore.analyse  # type: ignore[attr-defined]


def _examples() -> list[tuple[str, str]]:
    """(file, code) of every ```python block in README.md and docs/."""
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text("utf-8")
        for code in re.findall(r"```python\n(.*?)```", text, flags=re.S):
            out.append((path.name, code))
    return out


def _imports(code: str) -> list[tuple[str, str | None]]:
    """(module, name) of every flatscore import in a block (name None: `import module`)."""
    found: list[tuple[str, str | None]] = []
    for line in code.splitlines():
        line = line.split("#")[0].strip()
        if m := re.match(r"from (flatscore[\w.]*) import \(?([\w, ]+)\)?$", line):
            found += [(m[1], n.strip().split(" as ")[0]) for n in m[2].split(",") if n.strip()]
        elif m := re.match(r"import (flatscore[\w.]*)", line):
            found.append((m[1], None))
    return found


def test_docs_examples_import_only_public_names() -> None:
    examples = _examples()
    assert any(_imports(code) for _, code in examples)  # the check reads something
    bad = []
    for file, code in examples:
        for module, name in _imports(code):
            if module not in PUBLIC_PACKAGES:
                bad.append(f"{file}: {module} is internal")
            elif name is not None and name not in importlib.import_module(module).__all__:
                bad.append(f"{file}: {module}.{name} is not public")
    assert not bad, "\n".join(bad)


def test_a_private_import_in_an_example_is_caught() -> None:
    code = "from flatscore.analysis.comparison import compare\nfrom flatscore import analyze\n"
    assert _imports(code) == [
        ("flatscore.analysis.comparison", "compare"),
        ("flatscore", "analyze"),
    ]
