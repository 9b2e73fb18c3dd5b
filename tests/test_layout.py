"""The package's layering, read from the source, and the docs' links.

The import graph is built with `ast`, not by importing: imports inside functions count (a
lazy import is still a dependency), `if TYPE_CHECKING:` blocks do not (they never run).
Nodes are the first-level units of `src/flatscore`: each subpackage, and each loose module.
One level down, between modules (files), there is no cycle either, counting lazy imports and
then `TYPE_CHECKING` imports too (a type checker follows them), and nothing `run` builds on
imports `run` back.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "flatscore"
MAX_LOOSE_MODULES = 6


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported_modules(
    tree: ast.Module, module: str, is_package: bool, type_checking: bool = False
) -> Iterator[str]:
    """Every module a file imports, absolute, skipping `if TYPE_CHECKING:` bodies unless
    `type_checking`."""
    base = module.split(".") if is_package else module.split(".")[:-1]

    def visit(node: ast.AST) -> Iterator[str]:
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            for branch in node.orelse:
                yield from visit(branch)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[: len(base) - (node.level - 1)]
                target = ".".join([*parent, node.module] if node.module else parent)
            else:
                target = node.module or ""
            yield target
            for alias in node.names:  # `from flatscore import run` imports a unit
                yield f"{target}.{alias.name}"
        for child in ast.iter_child_nodes(node):
            yield from visit(child)

    yield from visit(tree)


def _unit(module: str) -> str | None:
    """The first-level unit of a `flatscore...` module name; None outside the package."""
    parts = module.split(".")
    if parts[0] != "flatscore" or len(parts) < 2:
        return None
    name = parts[1]
    if (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file():
        return name
    return None  # a name imported from flatscore/__init__.py, not a unit


def _units() -> list[str]:
    units = [p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    units += [p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"]
    return sorted(units)


Graph = dict[str, dict[str, str]]  # unit -> imported unit -> one file that imports it


def import_graph() -> Graph:
    """First-level unit -> first-level units it imports, from every file in the source."""
    graph: Graph = {unit: {} for unit in _units()}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        is_package = rel.name == "__init__"
        module = ".".join(rel.parts[:-1] if is_package else rel.parts)
        source = _unit(module)
        if source is None:  # flatscore/__init__.py: the package's face, not a unit
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for imported in _imported_modules(tree, module, is_package):
            target = _unit(imported)
            if target is not None and target != source:
                graph[source].setdefault(target, str(path.relative_to(ROOT)))
    return graph


def find_cycle(graph: Graph) -> list[str] | None:
    """One cycle of the graph (first node repeated at the end), or None."""
    try:
        TopologicalSorter({unit: set(deps) for unit, deps in graph.items()}).prepare()
    except CycleError as error:
        cycle: list[str] = error.args[1]
        return cycle
    return None


def test_no_import_cycle_between_first_level_units() -> None:
    graph = import_graph()
    cycle = find_cycle(graph)
    if cycle is not None:
        # graphlib lists a cycle against the edges' direction: a <- b <- ... <- a
        arrows = [f"{b} -> {a} ({graph[b][a]})" for a, b in pairwise(cycle)]
        pytest.fail("import cycle between first-level units:\n" + "\n".join(arrows))


def test_at_most_six_loose_modules_at_the_top() -> None:
    loose = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert len(loose) <= MAX_LOOSE_MODULES, loose


def test_the_graph_sees_lazy_imports_and_skips_type_checking() -> None:
    """The reader must count an import inside a function and ignore a TYPE_CHECKING one."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from flatscore.report import html\n"
        "def f():\n    from ..models import base\n    import flatscore.serve.app\n"
        "from . import jsonl\n"
    )
    found = set(_imported_modules(ast.parse(source), "flatscore.store.archive", False))
    assert "flatscore.models" in found
    assert "flatscore.serve.app" in found
    assert "flatscore.store.jsonl" in found
    assert not any(m.startswith("flatscore.report") for m in found)


def test_a_planted_cycle_is_found() -> None:
    graph = import_graph()
    assert find_cycle(graph) is None
    source, targets = next((u, t) for u, t in graph.items() if t)
    target = next(iter(targets))
    graph[target][source] = "planted"
    assert find_cycle(graph) is not None


# --- between modules ---------------------------------------------------------------


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its `__init__.py`)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def module_graph(type_checking: bool = False) -> Graph:
    """Module -> modules of the package it imports (the longest module a dotted name names:
    `from flatscore.run.study import Study` imports `flatscore.run.study`), lazy imports
    counted, `TYPE_CHECKING` imports too if asked."""
    modules = _modules()
    graph: Graph = {module: {} for module in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for imported in _imported_modules(tree, module, is_package, type_checking):
            parts = imported.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            target = ".".join(parts)
            if target and target != module:
                graph[module].setdefault(target, str(path.relative_to(ROOT)))
    return graph


def module_cycles(graph: Graph) -> list[list[str]]:
    """Every cycle between modules, as its strongly connected component (sorted names)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            connect(node)
    return sorted(found)


def _in_unit(module: str, unit: str) -> bool:
    return module == f"flatscore.{unit}" or module.startswith(f"flatscore.{unit}.")


def _check_no_module_cycle(type_checking: bool) -> None:
    cycles = module_cycles(module_graph(type_checking))
    shown = ["  " + ", ".join(m.removeprefix("flatscore.") for m in c) for c in cycles]
    assert not cycles, "import cycles between modules:\n" + "\n".join(shown)


def test_no_import_cycle_between_modules() -> None:
    """Counting lazy imports: a cycle between modules is found however it is closed."""
    _check_no_module_cycle(type_checking=False)


def test_no_import_cycle_between_modules_counting_type_checking_imports() -> None:
    _check_no_module_cycle(type_checking=True)


def test_nothing_run_builds_on_imports_run() -> None:
    """`run` sits on the study schema, models, agents and the rest: none of the units it
    imports (nor `study`, the schema) imports `run` back, not even for a type."""
    units = import_graph()
    below = {*units["run"], "study"}
    graph = module_graph(type_checking=True)
    back = [
        f"{module} -> {target} ({where})"
        for module, targets in graph.items()
        if any(_in_unit(module, unit) for unit in below)
        for target, where in targets.items()
        if _in_unit(target, "run")
    ]
    assert not back, "imports of run from below it:\n" + "\n".join(back)


def test_the_module_graph_finds_a_planted_cycle() -> None:
    graph = module_graph(type_checking=True)
    assert "flatscore.study.schema" in graph["flatscore.models.arm_checks"] or any(
        t.startswith("flatscore.study") for t in graph["flatscore.models.arm_checks"]
    )  # a TYPE_CHECKING import is seen
    assert not any(
        t.startswith("flatscore.study") for t in module_graph()["flatscore.models.arm_checks"]
    )
    graph["flatscore.study.schema"]["flatscore.models.arm_checks"] = "planted"
    assert any("flatscore.study.schema" in c for c in module_cycles(graph))


# --- the docs' relative links ---------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]\n]*\]\(([^)\s]+)\)")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _relative_links(page: Path) -> Iterator[tuple[int, str]]:
    in_fence = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for match in LINK.finditer(line):
            target = match.group(1) or match.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL or an anchor on the same page
            yield number, target


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = [
        f"{page.relative_to(ROOT)}:{number}: {target}"
        for number, target in _relative_links(page)
        if not (page.parent / target.split("#", 1)[0]).exists()
    ]
    assert not broken, "\n".join(broken)


def test_readme_lists_every_doc_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\(docs/([\w.-]+\.md)[)#]", readme))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert pages <= listed, f"docs/ pages missing from README: {sorted(pages - listed)}"


def _prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of what a reader reads: every line of a page, a Python file's comments
    and strings (names in code are not references)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".py":
        yield from enumerate(text.splitlines(), 1)
        return
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING):
            yield tok.start[0], tok.string


def test_no_reference_to_a_design_file_outside_the_repository() -> None:
    """The docs stand on their own: no pointer to a design file the repository lacks."""
    roots = [ROOT / "README.md", ROOT / "docs", ROOT / "src", ROOT / "tests", ROOT / "studies"]
    files = [
        f
        for r in roots
        for f in ([r] if r.is_file() else r.rglob("*"))
        if f.suffix in {".md", ".py", ".yaml", ".toml", ".txt", ".html"} and f.is_file()
    ]
    word = re.compile(r"\b" + "DES" + r"IGN\b")  # spelled apart so this file does not match
    offenders = [
        f"{f.relative_to(ROOT)}:{n}"
        for f in files
        if f.stat().st_size < 2_000_000
        for n, line in _prose(f)
        if word.search(line)
    ]
    assert not offenders, offenders


# --- docs/architecture.md held against the code ---------------------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _top_level_names(path: Path) -> set[str]:
    """What `from module import NAME` can reach: definitions, assignments and imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _resolves(dotted: str) -> bool:
    """`flatscore.a.b.Name[.attr]`: the longest module prefix exists and defines `Name`."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = PACKAGE.parent.joinpath(*parts[:i])
        module = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if module.is_file():
            rest = parts[i:]
            return not rest or rest[0] in _top_level_names(module) or (base / rest[0]).exists()
    return False


def test_architecture_map_names_every_unit() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    rows = {m.group(1) for m in re.finditer(r"^\| `([\w]+(?:/|\.py))` \|", text, re.M)}
    units = {f"{u}/" if (PACKAGE / u).is_dir() else f"{u}.py" for u in _units()}
    assert units == rows, f"missing from the map: {units - rows}; not a unit: {rows - units}"


def test_architecture_names_only_what_exists() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    missing = [d for d in re.findall(r"`(flatscore(?:\.\w+)+)", text) if not _resolves(d)]
    for path in set(re.findall(r"(?<![\w./-])((?:[\w-]+/)+[\w-]+\.py)\b", text)):
        if not ((ROOT / path).exists() or (PACKAGE / path).exists()):
            missing.append(path)
    for row in re.finditer(r"^\| `(\w+)/` \| (.*) \|[^|]*\|$", text, re.M):
        unit, holds = PACKAGE / row.group(1), row.group(2)
        known = {p.stem for p in unit.rglob("*")} | {
            n for f in unit.rglob("*.py") for n in _top_level_names(f)
        }
        for name in re.findall(r"`([\w.]+?)/?`", holds):
            if name not in known and not (unit / name).exists():
                missing.append(f"{row.group(1)}/: {name}")
    assert not missing, missing


def test_architecture_map_allows_every_import() -> None:
    """The map's "imports" column is the layering: an arrow it does not allow is a failure
    (add it to the column if it belongs there, or move the code)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    units = _units()
    graph = import_graph()
    extra = []
    for row in re.finditer(r"^\| `(\w+)(?:/|\.py)` \| .* \| ([^|]*) \|$", text, re.M):
        unit, cell = row.group(1), row.group(2)
        allowed = set(units) if cell.strip() == "everything" else set(re.findall(r"\w+", cell))
        extra += [f"{unit} -> {t} ({at})" for t, at in graph[unit].items() if t not in allowed]
    assert not extra, "imports the map in docs/architecture.md does not allow:\n" + "\n".join(extra)
