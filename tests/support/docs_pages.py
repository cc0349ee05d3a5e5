"""How the docs pages define their numbered items, for the tests that hold code, tests and the index to
them (tests/core/test_docs_rules.py, tests/core/test_docs_index.py): a rule identifier is defined by a
heading that starts with it or by a bold anchor opening a (list) line, a Dagster note by a heading of
docs/dagster-notes.md."""

import re

from support.paths import REPO

DOCS = REPO / "docs"

# A rule identifier: a letter D, S or Q with its number, or an ADDENDUM section such as `ADDENDUM 4.1`.
_IDENT = r"(?:[DSQ][0-9]+|ADDENDUM [0-9]+(?:\.[0-9]+)*)"
_HEADING = re.compile(rf"^#{{1,6}}\s+({_IDENT})(?![0-9.]*[0-9])")
_ANCHOR = re.compile(rf"^\s*(?:[-*]\s+)?\*\*({_IDENT})\.?\*\*")
_NOTES_HEADING = re.compile(r"^#{1,6}\s+(DAGSTER_NOTES [0-9]+)(?![0-9])")


def defined_in(markdown: str) -> list[str]:
    """The identifiers a docs page defines, in order (repeats kept, to detect them)."""
    out = []
    for line in markdown.splitlines():
        match = _HEADING.match(line) or _ANCHOR.match(line)
        if match:
            out.append(match.group(1))
    return out


def notes_defined_in(markdown: str) -> list[str]:
    """The Dagster notes a page defines, in order (repeats kept)."""
    return [m.group(1) for m in map(_NOTES_HEADING.match, markdown.splitlines()) if m]
