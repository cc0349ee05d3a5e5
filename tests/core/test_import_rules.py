"""docs/architecture.md's "Modules and what each may import" table is the import rule of the package.

Every package-internal import (top level or lazy, inside a function) must be allowed by the row of
the importing module, so the page stays true to the code and a layering slip (an extractor reaching
for the part writer, the core importing Dagster code) fails here instead of in review.
"""

import ast
import re
from pathlib import Path

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
PACKAGE = REPO / "slm4ie_assets"
ARCHITECTURE = REPO / "docs" / "architecture.md"
DAGSTER_LAYER_MARK = "any core module"
EARLIER_ROWS_MARK = "the core modules above"


def dotted(name: str) -> str:
    """`extractors/xml/` or `archives/` or `store/locks.py` -> `extractors.xml`, `archives`, `store.locks`."""
    return name.strip("`").removesuffix(".py").strip("/").replace("/", ".")


def table_rows() -> list[tuple[list[str], str]]:
    """(module names of column 1, column 3 text) for each row of the import table, in order."""
    text = ARCHITECTURE.read_text()
    section = text.split("## Modules and what each may import", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        rows.append(([dotted(n) for n in re.findall(r"`[^`]+`", cells[0])], cells[2]))
    return rows


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def row_of(module: str, rows: list[tuple[list[str], str]]) -> int:
    """Index of the row governing `module`: its own name, its package's row, or the format row."""
    candidates = [module]
    parts = module.split(".")
    candidates += [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]
    if parts[0] == "extractors" and len(parts) == 2:
        candidates.append("extractors.<format>")
    for candidate in candidates:
        for index, (names, _) in enumerate(rows):
            if candidate in names:
                return index
    raise AssertionError(f"{module} has no row in docs/architecture.md's import table")


def is_module(dotted_name: str) -> bool:
    path = PACKAGE.joinpath(*dotted_name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def internal_imports(path: Path, module: str) -> set[str]:
    """Package modules imported by `path` (top level, lazy or for type checking), as dotted names
    relative to the package; `from pkg import name` counts as `pkg.name` where that is a module."""
    package_parts = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package_parts[: len(package_parts) - node.level + 1]
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("slm4ie_assets."):
            target = node.module.removeprefix("slm4ie_assets.")
        else:
            continue
        for alias in node.names:
            submodule = f"{target}.{alias.name}".strip(".")
            found.add(submodule if is_module(submodule) else target)
    return {name for name in found if name}


def allowed(target: str, importer: str, row: int, rows: list[tuple[list[str], str]]) -> bool:
    names, rule = rows[row]
    if any(target == n or target.startswith(n + ".") for n in names):
        return True  # inside the importer's own package or row
    if DAGSTER_LAYER_MARK in rule:
        return True
    permitted = [dotted(n) for n in re.findall(r"`[^`]+`", rule)]
    if EARLIER_ROWS_MARK in rule:
        permitted += [n for earlier, _ in rows[:row] for n in earlier]
    return any(target == p or target.startswith(p + ".") for p in permitted)


def package_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


@pytest.mark.parametrize("path", package_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_architecture_table(path: Path) -> None:
    rows = table_rows()
    module = module_name(path)
    imported = internal_imports(path, module)
    if not imported:
        return  # e.g. a package's docstring-only __init__: nothing to govern
    row = row_of(module, rows)
    wrong = sorted(t for t in imported if not allowed(t, module, row, rows))
    assert not wrong, (f"{module} imports {wrong}, which docs/architecture.md does not allow for it "
                       f"(row {rows[row][0]}: {rows[row][1]!r}); fix the import or the table")


def test_the_rule_can_fail() -> None:
    rows = table_rows()
    schema_row = row_of("schema", rows)
    assert not allowed("parts.writer", "schema", schema_row, rows)
    assert not allowed("dagster_layer.assets", "extractors.text", row_of("extractors.text", rows), rows)
    assert allowed("extractors.base", "extractors.text", row_of("extractors.text", rows), rows)
    assert allowed("store.dataset_store", "pipeline", row_of("pipeline", rows), rows)


def test_every_row_names_a_real_module() -> None:
    real = {module_name(p) for p in package_modules()}
    for names, _ in table_rows():
        for name in names:
            if name == "extractors.<format>":
                continue
            assert name in real or any(r.startswith(name + ".") for r in real), f"{name} is not a module"


def imports_dagster(path: Path) -> list[str]:
    """Every import of `dagster` or a `dagster_*` package in `path`, top level or lazy."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        found += [f"{n} (line {node.lineno})" for n in names if n.split(".")[0].startswith("dagster")]
    return found


def core_modules() -> list[Path]:
    """Modules whose row does not allow `dagster`: the core, which plain-Python callers import."""
    rows = table_rows()

    def rule(path: Path) -> str:
        try:
            return rows[row_of(module_name(path), rows)][1]
        except AssertionError:
            return ""  # a package's docstring-only __init__ (extractors/): core, and held to it

    return [p for p in package_modules() if "`dagster`" not in rule(p)]


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_core_imports_no_dagster(path: Path) -> None:
    found = imports_dagster(path)
    assert not found, f"{module_name(path)} is a core module (docs/architecture.md) but imports {found}"


def test_the_dagster_rule_covers_the_core_and_can_fail(tmp_path: Path) -> None:
    names = {module_name(p) for p in core_modules()}
    assert {"catalog.spec", "pipeline", "store.dataset_store", "extractors.macocu.extractor", "remedies",
            "cli.main"} <= names
    assert "dagster_layer.assets" not in names and "dagster_layer.user_errors" not in names
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from dagster._utils.schedules import is_valid_cron_string\n")
    assert imports_dagster(probe) == ["dagster._utils.schedules (line 2)"]


def import_graph() -> dict[str, set[str]]:
    """Each package module -> the package modules importing it runs: those it names, and the
    packages above them whose `__init__` Python runs first (not its own, which already runs)."""
    graph = {}
    for path in package_modules():
        module = module_name(path)
        runs = set()
        for target in internal_imports(path, module):
            parts = target.split(".")
            packages = {".".join(parts[:i]) for i in range(1, len(parts))}
            runs |= {target} | {p for p in packages if not (module == p or module.startswith(p + "."))}
        graph[module] = runs
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle of each strongly connected group of modules (Tarjan), as [a, b, ..., a]."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            group = set()
            while not group or module not in group:
                group.add(stack.pop())
            if len(group) > 1 or module in graph.get(module, ()):
                groups.append(group)

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return sorted(cycle_through(min(group), group, graph) for group in groups)


def cycle_through(start: str, group: set[str], graph: dict[str, set[str]]) -> list[str]:
    """The shortest path from `start` back to itself inside `group` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(graph[module] & group):
                if target == start:
                    path = [module]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if target not in came_from:
                    came_from[target] = module
                    following.append(target)
        frontier = following
    raise AssertionError(f"{start} is on no cycle of {sorted(group)}")


def test_no_module_imports_itself_through_others() -> None:
    cycles = import_cycles(import_graph())
    assert not cycles, "import cycles (break each: move what both need into a module of its own): " + "; ".join(
        " -> ".join(cycle) for cycle in cycles)


def test_the_cycle_rule_can_fail() -> None:
    graph = {"cli.main": {"cli.run", "catalog"}, "cli.run": {"cli.slices", "cli.main"}, "cli.slices": set(),
             "catalog": {"catalog"}, "store": {"catalog"}}
    assert import_cycles(graph) == [["catalog", "catalog"], ["cli.main", "cli.run", "cli.main"]]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a", "b"}}) == [["a", "b", "c", "a"]]
    assert "archives" in import_graph()["planning.settling"]  # a package's __init__ runs before its modules
