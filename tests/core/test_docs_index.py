"""docs/README.md is a true index: one row per page of docs/, no row for a page that is not there, and each
row states the numbered items its page really has (`D1`-`D24`, `DAGSTER_NOTES 1`-`11`, sections `1`-`4`, ...).
The counts come from the pages' own headings, so one more decision, note or section fails here until the index
says so, and so does a new page nobody listed."""

import re
from collections import defaultdict

import pytest

from support.docs_pages import DOCS, defined_in, notes_defined_in

INDEX = DOCS / "README.md"
_ROW = re.compile(r"^\|\s*\[([^\]]+)\]\(([^)#]+)\)\s*\|(.+)\|\s*$")
# a range as the index writes it: `D1`-`D24`, `DAGSTER_NOTES 1`-`11`, `1`-`4` (the prefix is not repeated
# after the dash when it is a word: `ADDENDUM 1`-`ADDENDUM 9` and `ADDENDUM 1`-`9` both read)
_RANGE = re.compile(r"`((?:[A-Z_]+ )?[A-Z]?)([0-9]+)`\s*-\s*`(?:\1|[A-Z_]+ )?([0-9]+)`")
_NUMBERED_HEADING = re.compile(r"^#{1,6}\s+([0-9]+)\.\s")


def index_rows(text: str) -> dict[str, str]:
    """page file name -> what its row says."""
    rows = {}
    for line in text.splitlines():
        match = _ROW.match(line)
        if match:
            assert match.group(1) == match.group(2), f"row text and link differ: {line}"
            assert match.group(2) not in rows, f"two rows for {match.group(2)}: one page, one row"
            rows[match.group(2)] = match.group(3)
    return rows


def numbered_items(markdown: str) -> dict[str, list[int]]:
    """family -> the numbers a page defines: rule identifiers (D, S, Q), top-level ADDENDUM sections,
    DAGSTER_NOTES, and plain numbered sections ("## 3. ...", family "")."""
    found: dict[str, list[int]] = defaultdict(list)
    for ident in defined_in(markdown):
        if ident.startswith("ADDENDUM "):
            if "." not in ident:
                found["ADDENDUM "].append(int(ident.split()[1]))
        else:
            found[ident[0]].append(int(ident[1:]))
    for note in notes_defined_in(markdown):
        found["DAGSTER_NOTES "].append(int(note.split()[1]))
    for line in markdown.splitlines():
        match = _NUMBERED_HEADING.match(line)
        if match:
            found[""].append(int(match.group(1)))
    return dict(found)


def stated_ranges(row: str) -> dict[str, tuple[int, int]]:
    return {prefix: (int(first), int(last)) for prefix, first, last in _RANGE.findall(row)}


def mismatches(page: str, markdown: str, row: str) -> list[str]:
    """What the row gets wrong about the page's numbered items."""
    problems = []
    items, stated = numbered_items(markdown), stated_ranges(row)
    for family, numbers in sorted(items.items()):
        expected = (1, len(numbers))
        if sorted(numbers) != list(range(1, len(numbers) + 1)):
            problems.append(f"{page}: {family or 'sections '}numbered {sorted(numbers)}, "
                            f"not 1 to {len(numbers)} once each")
        if stated.get(family) != expected:
            says = f"`{family}{stated[family][0]}`-`{stated[family][1]}`" if family in stated else "nothing"
            problems.append(f"{page}: has `{family}1`-`{family}{len(numbers)}`, the index says {says}")
    for family in sorted(set(stated) - set(items)):
        problems.append(f"{page}: the index states `{family}` items the page does not have")
    return problems


def test_the_index_lists_every_page_of_docs_and_no_other():
    rows = index_rows(INDEX.read_text(encoding="utf-8"))
    pages = {p.name for p in DOCS.glob("*.md")} - {INDEX.name}
    assert not pages - set(rows), f"pages of docs/ missing from docs/README.md: {sorted(pages - set(rows))}"
    assert not set(rows) - pages, f"docs/README.md lists pages that are not there: {sorted(set(rows) - pages)}"


def test_each_row_states_the_numbered_items_its_page_has():
    rows = index_rows(INDEX.read_text(encoding="utf-8"))
    problems = [p for page, row in sorted(rows.items()) if (DOCS / page).is_file()
                for p in mismatches(page, (DOCS / page).read_text(encoding="utf-8"), row)]
    assert not problems, "docs/README.md is out of date:\n  " + "\n  ".join(problems)


def test_the_counts_come_from_the_headings():
    """Guards the parser: the pages' real families are seen, and a stale or missing range is reported."""
    decisions = numbered_items((DOCS / "decisions.md").read_text(encoding="utf-8"))
    assert len(decisions["D"]) >= 24 and len(decisions["S"]) >= 14
    assert len(numbered_items((DOCS / "dagster-notes.md").read_text(encoding="utf-8"))["DAGSTER_NOTES "]) >= 11
    page = "# X\n## D1. a\n## D2. b\n### S1. c\n## DAGSTER_NOTES 1 — d\n## 1. e\n## 2. f\n"
    assert mismatches("x.md", page, "`D1`-`D2`, `S1`-`S1`, `DAGSTER_NOTES 1`-`1`, sections `1`-`2`") == []
    stale = mismatches("x.md", page + "## D3. new\n", "`D1`-`D2`, `S1`-`S1`, `DAGSTER_NOTES 1`-`1`, `1`-`2`")
    assert stale == ["x.md: has `D1`-`D3`, the index says `D1`-`2`"]
    assert mismatches("x.md", "## 1. a\n## 3. b\n", "`1`-`2`") == [
        "x.md: sections numbered [1, 3], not 1 to 2 once each"]
    assert mismatches("x.md", "# nothing numbered\n", "`Q1`-`Q20`") == [
        "x.md: the index states `Q` items the page does not have"]
    assert index_rows("| [a.md](a.md) | holds `D1`-`D3` |\n| page | x |\n") == {"a.md": " holds `D1`-`D3` "}
    with pytest.raises(AssertionError, match="two rows for a.md"):
        index_rows("| [a.md](a.md) | one |\n| [a.md](a.md) | the same page again |\n")
