"""The package's folders (and top-level modules) are layers in one order, written once in
docs/architecture.md ("The package", the line `Layers, lowest first:`), and every import runs down it.

The import table of the same page says module by module what each may import; this test holds the
coarser rule that the table could drift from row by row: no module imports (at the top, lazily inside
a function, under TYPE_CHECKING, or by a dotted name handed to importlib) a module of a layer above
its own. Modules of one folder may import each other; units written side by side in one layer
(`a, b`) may not import each other. A layer named in the line whose folder does not exist yet (one
that another change is adding) is skipped; every folder and top-level module that exists must be
placed.
"""

import ast
import re
from dataclasses import dataclass
from pathlib import Path

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
PACKAGE = REPO / "slm4ie_assets"
ARCHITECTURE = REPO / "docs" / "architecture.md"
LAYERS_MARK = "Layers, lowest first:"
DOTTED = re.compile(r"slm4ie_assets(?:\.\w+)+(?::\w+)?")  # a module named for importlib


def layers(text: str | None = None) -> list[list[str]]:
    """The layers of the package, lowest first, each a list of units (a folder or a top-level
    module, by name), parsed from the one line of docs/architecture.md's "The package" that starts
    with `Layers, lowest first:` and separates layers by `<` and the units of one layer by `,`."""
    text = ARCHITECTURE.read_text() if text is None else text
    section = text.split("\n## The package\n", 1)[1].split("\n## ", 1)[0]
    found = [line for line in section.splitlines() if line.startswith(LAYERS_MARK)]
    assert len(found) == 1, f"'The package' must hold exactly one line starting with {LAYERS_MARK!r}"
    return [[name.strip("`/").removesuffix(".py") for name in re.findall(r"`[^`]+`", layer)]
            for layer in found[0].removeprefix(LAYERS_MARK).split("<")]


def layer_of(units: list[list[str]]) -> dict[str, int]:
    index: dict[str, int] = {}
    for number, layer in enumerate(units):
        assert layer, f"layer {number} of the line names no unit"
        for unit in layer:
            assert unit not in index, f"{unit} is placed twice in the layers line"
            index[unit] = number
    return index


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def package_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py")


def existing_units() -> set[str]:
    return {module_name(p).split(".")[0] for p in package_modules()}


@dataclass(frozen=True)
class Import:
    target: str  # dotted, relative to the package ("store.dataset_store"); "" for the package itself
    line: int


def imports_of(source: str, module: str, is_package: bool) -> list[Import]:
    """Every package module `source` (the text of `module`) imports, anywhere in its tree: `from .x
    import y`, `from slm4ie_assets.x import y`, `import slm4ie_assets.x`, and a string naming
    `slm4ie_assets.x` whole (what importlib is handed)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[Import] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found += [Import(f"{target}.{a.name}".strip("."), node.lineno) for a in node.names] if not node.module \
                else [Import(target, node.lineno)]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "slm4ie_assets":
            target = node.module.removeprefix("slm4ie_assets").strip(".")  # type: ignore[union-attr]
            found += [Import(f"{target}.{a.name}".strip("."), node.lineno) for a in node.names] if not target \
                else [Import(target, node.lineno)]
        elif isinstance(node, ast.Import):
            found += [Import(a.name.removeprefix("slm4ie_assets").strip("."), node.lineno)
                      for a in node.names if a.name.split(".")[0] == "slm4ie_assets"]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED.fullmatch(node.value):
            found.append(Import(node.value.split(":")[0].removeprefix("slm4ie_assets."), node.lineno))
    return [i for i in found if i.target]


def up_imports(module: str, imported: list[Import], index: dict[str, int]) -> list[str]:
    """What `module` imports from a layer above its own, or from another unit of its own layer."""
    unit = module.split(".")[0]
    wrong = []
    for imp in imported:
        target_unit = imp.target.split(".")[0]
        if target_unit == unit or index[target_unit] < index[unit]:
            continue
        where = "above it" if index[target_unit] > index[unit] else "beside it, in the same layer"
        wrong.append(f"{module} (line {imp.line}) imports {imp.target}: {target_unit} is {where}")
    return wrong


def test_every_folder_and_top_level_module_has_a_layer() -> None:
    index = layer_of(layers())
    unplaced = sorted(existing_units() - set(index))
    assert not unplaced, f"place {unplaced} in docs/architecture.md's line {LAYERS_MARK!r}"


def test_no_import_runs_up_the_layers() -> None:
    index = layer_of(layers())
    wrong = []
    for path in package_modules():
        module = module_name(path)
        wrong += up_imports(module, imports_of(path.read_text(), module, path.name == "__init__.py"), index)
    assert not wrong, ("imports against the order of docs/architecture.md's layers (move the code to the "
                       "layer it belongs to, or pass what it needs down as a value):\n  " + "\n  ".join(wrong))


def test_the_rule_can_fail() -> None:
    doc = ("# x\n\n## The package\n\nLayers, lowest first: `utils/` < `schema.py` < `storage/` < `store/` "
           "< `parts/` < `cli/`, `definitions.py`\n\n## Next\n")
    units = layers(doc)
    assert units == [["utils"], ["schema"], ["storage"], ["store"], ["parts"], ["cli", "definitions"]]
    index = layer_of(units)
    source = ("from typing import TYPE_CHECKING\nfrom ..parts.sidecar_writer import stub_line\n"
              "from . import manifest\nfrom ..utils import gzipio\nimport slm4ie_assets.cli.main\n"
              "if TYPE_CHECKING:\n    from slm4ie_assets.definitions import defs\n"
              "def f():\n    from .. import parts\n    return 'slm4ie_assets.parts.writer:PartWriter'\n")
    imported = imports_of(source, "store.publish", is_package=False)
    assert {i.target for i in imported} == {"parts.sidecar_writer", "store.manifest", "utils", "cli.main",
                                            "definitions", "parts", "parts.writer"}
    wrong = up_imports("store.publish", imported, index)
    assert sorted(w.split(" imports ")[1].split(":")[0] for w in wrong) == [
        "cli.main", "definitions", "parts", "parts.sidecar_writer", "parts.writer"]
    assert up_imports("definitions", [Import("cli.main", 3)], index) == [
        "definitions (line 3) imports cli.main: cli is beside it, in the same layer"]
    assert not up_imports("parts.writer", [Import("store.part_meta", 1), Import("parts.sidecar_writer", 2)], index)
