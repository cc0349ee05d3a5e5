"""docs/architecture.md's map of the package is its folder tree: the tree drawn under "The package"
names every module and folder of `slm4ie_assets/`, each with what it holds, and nothing else, so a
newcomer can trust the map; and the top level stays a short list of entry points and layers."""

import re
from pathlib import Path

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
PACKAGE = REPO / "slm4ie_assets"
ARCHITECTURE = REPO / "docs" / "architecture.md"
TOP_LEVEL_LIMIT = 20
LINE = re.compile(r"^(?P<indent> *)(?P<name>[\w.]+/?)(?:\s{2,}(?P<what>\S.*))?$")


def drawn_tree() -> dict[str, str]:
    """Path (relative to the package, folders ending in `/`) -> what the map says it holds."""
    section = ARCHITECTURE.read_text().split("\n## The package\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```\n", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    assert lines[0].strip() == "slm4ie_assets/", "the tree starts at slm4ie_assets/"
    drawn: dict[str, str] = {}
    folders: list[str] = []
    for number, line in enumerate(lines[1:], start=2):
        match = LINE.match(line)
        assert match, f"tree line {number} is not `<indent><name>  <what it holds>`: {line!r}"
        depth = len(match["indent"]) // 2 - 1
        assert len(match["indent"]) % 2 == 0 and 0 <= depth <= len(folders), f"tree line {number}: bad indent"
        folders = folders[:depth]
        path = "".join(folders) + match["name"]
        assert match["what"], f"tree line {number}: say what {path} holds"
        drawn[path] = match["what"]
        if path.endswith("/"):
            folders.append(match["name"])
    return drawn


def real_tree() -> set[str]:
    paths = set()
    for file in PACKAGE.rglob("*.py"):
        rel = file.relative_to(PACKAGE)
        for i in range(1, len(rel.parts)):
            paths.add("/".join(rel.parts[:i]) + "/")
        if file.name != "__init__.py":
            paths.add(rel.as_posix())
    return paths


def test_the_map_is_the_folder_tree() -> None:
    drawn, real = set(drawn_tree()), real_tree()
    assert not real - drawn, f"docs/architecture.md's tree lacks {sorted(real - drawn)}"
    assert not drawn - real, f"docs/architecture.md's tree names what does not exist: {sorted(drawn - real)}"


def test_the_top_level_is_short() -> None:
    top = [p for p in real_tree() if p.count("/") == 0 or (p.endswith("/") and p.count("/") == 1)]
    assert len(top) <= TOP_LEVEL_LIMIT, f"{len(top)} modules and folders at the top level: {sorted(top)}"


def test_the_check_can_fail() -> None:
    real = real_tree()
    assert "store/" in real and "pipeline.py" in real
    assert "nonexistent.py" not in real
