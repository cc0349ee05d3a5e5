"""docs/adding-an-extractor.md's contract table lists every public member of `Extractor`, and only
those (issue 22 item 5). The members are found by introspection, so a member added, renamed or
removed in `extractors/base.py` fails here until the table says so."""

import re

from slm4ie_assets.extractors.base import Extractor
from support.paths import REPO

DOC = REPO / "docs" / "adding-an-extractor.md"


def public_members(cls: type) -> set[str]:
    """Attributes, methods and annotated instance attributes (`options`) not starting with `_`."""
    names = {n for n in dir(cls) if not n.startswith("_")} - set(dir(object))
    for klass in cls.__mro__[:-1]:
        names |= {n for n in getattr(klass, "__annotations__", {}) if not n.startswith("_")}
    return names


def table_members(text: str) -> list[str]:
    """The member each row of the contract table is about: the first backticked name of its first cell."""
    section = text.split("## 1. Write the module", 1)[1].split("\n## ", 1)[0]
    found = []
    for line in section.splitlines():
        if line.startswith("| `"):
            found.append(re.match(r"\| `([A-Za-z_][A-Za-z0-9_]*)", line).group(1))
    return found


def test_the_contract_table_lists_every_public_member_of_extractor_and_no_other():
    listed = table_members(DOC.read_text(encoding="utf-8"))
    assert len(listed) == len(set(listed)), f"a member has two rows: {listed}"
    members = public_members(Extractor)
    assert not members - set(listed), f"missing from the contract table in {DOC.name}: {sorted(members - set(listed))}"
    assert not set(listed) - members, f"{DOC.name} lists what Extractor no longer has: {sorted(set(listed) - members)}"


def test_the_check_sees_members_of_every_kind():
    class Probe(Extractor):
        colour: str
        size = 3

        def paint(self) -> None: ...

        @classmethod
        def build(cls) -> None: ...

        def _hidden(self) -> None: ...

    found = public_members(Probe) - public_members(Extractor)
    assert found == {"colour", "size", "paint", "build"}
    assert table_members("## 1. Write the module\n| `a(x)` | y |\n| `b` (class attribute) | z |\n## 2.") == ["a", "b"]
