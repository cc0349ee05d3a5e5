"""Every rule identifier the code and tests cite (D6, S14, Q16, ADDENDUM 4.1, test_d6_..., test_addendum_5_3_...)
is defined in docs/ as a heading or a bold anchor, every `DAGSTER_NOTES n` is a heading of docs/dagster-notes.md
and every `docs/architecture.md "section"` a heading of that page, so a clone can resolve them all."""

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from support.docs_pages import DOCS, defined_in, notes_defined_in
from support.paths import REPO

THIS_FILE = Path(__file__).resolve()

# Citations in prose: D6, S14, Q10a (-> Q10), ranges such as S6-S9, and ADDENDUM 3.1, 3.2, 5 / 6.1.
_RULE = re.compile(r"\b([DSQ])([0-9]+)[a-d]?\b")
_RANGE = re.compile(r"\b([DSQ])([0-9]+)\s*[-\u2013]\s*\1([0-9]+)\b")
_SECTION = r"[0-9]+(?:\.[0-9]+)*"
_ADDENDUM = re.compile(rf"\bADDENDUM\s+({_SECTION}(?:\s*(?:,|/|\band\b)\s*{_SECTION}\b)*)")
# Citations in test names: test_d6_..., test_q2_d4_..., test_addendum_5_3_...
_TEST_NAME = re.compile(r"\bdef\s+(test_\w+)")
_NAME_RULE = re.compile(r"(?:^|_)([dsq])([0-9]+)[a-d]?(?=_|$)")
_NAME_ADDENDUM = re.compile(r"addendum((?:_[0-9]+)+)")
# Definitions (support/docs_pages.py): a heading that starts with the identifier, or a bold anchor
# opening a (list) line.


def cited_in(text: str) -> set[str]:
    """The rule identifiers a source text cites."""
    found = {f"{letter}{number}" for letter, number in _RULE.findall(text)}
    for letter, first, last in _RANGE.findall(text):
        found.update(f"{letter}{n}" for n in range(int(first), int(last) + 1))
    for listed in _ADDENDUM.findall(text):
        found.update(f"ADDENDUM {section}" for section in re.findall(_SECTION, listed))
    for name in _TEST_NAME.findall(text):
        found.update(f"{letter.upper()}{number}" for letter, number in _NAME_RULE.findall(name))
        found.update("ADDENDUM " + parts[1:].replace("_", ".") for parts in _NAME_ADDENDUM.findall(name))
    return found


def source_files() -> list[Path]:
    files = [REPO / "README.md"]
    for folder in ("slm4ie_assets", "tests", "bench", "examples", "tools"):
        files.extend(sorted((REPO / folder).rglob("*.py")))
    for pattern in ("*.md", "*.yaml"):
        files.extend(sorted((REPO / "deploy").glob(pattern)))
    return [f for f in files if f.resolve() != THIS_FILE]


def citations(scan: Callable[[str], set[str]] = cited_in) -> dict[str, list[str]]:
    """identifier -> the `path:line` places citing it (`scan` finds what one line cites)."""
    where = defaultdict(list)
    for path in source_files():
        rel = path.relative_to(REPO)
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for ident in scan(line):
                where[ident].append(f"{rel}:{lineno}")
    return where


def definitions() -> dict[str, list[str]]:
    """identifier -> the docs pages defining it."""
    pages = defaultdict(list)
    for page in sorted(DOCS.rglob("*.md")):
        for ident in defined_in(page.read_text(encoding="utf-8")):
            pages[ident].append(page.name)
    return pages


def undefined(cited: dict[str, list[str]], defined: Iterable[str]) -> dict[str, list[str]]:
    known = set(defined)
    return {ident: places for ident, places in cited.items() if ident not in known}


def _listing(missing: dict[str, list[str]]) -> str:
    return "\n".join(f"  {ident}: {', '.join(places[:3])}{' ...' if len(places) > 3 else ''}"
                     for ident, places in sorted(missing.items()))


def test_every_identifier_cited_in_code_tests_and_bench_is_defined_in_docs():
    missing = undefined(citations(), definitions())
    assert not missing, "rule identifiers cited but defined nowhere in docs/ (add a heading):\n" + _listing(missing)


def test_the_scan_finds_the_citations_it_is_meant_to_find():
    """Guards the scanner: if it stopped matching, the test above would pass vacuously."""
    cited = citations()
    for ident in ("D6", "D22", "S3", "S14", "Q16", "ADDENDUM 2.1", "ADDENDUM 4.1", "ADDENDUM 8.3"):
        assert ident in cited, ident
    assert sum(len(places) for places in cited.values()) > 300


def test_a_made_up_identifier_is_reported_and_a_defined_one_is_not():
    source = ("# D99 and S77 are not rules; D6 is. See ADDENDUM 12.7, 4.1 and Q42b.\n"
              "def test_addendum_13_2_and_s88_thing(): pass\n")
    cited = {ident: ["example.py:1"] for ident in cited_in(source)}
    assert set(cited) == {"D99", "S77", "D6", "ADDENDUM 12.7", "ADDENDUM 4.1", "Q42", "ADDENDUM 13.2", "S88"}
    missing = undefined(cited, definitions())
    assert set(missing) == {"D99", "S77", "ADDENDUM 12.7", "Q42", "ADDENDUM 13.2", "S88"}


def test_citation_forms():
    assert cited_in("ADDENDUM 3.1, 3.2, 5 as amended by D3, D4") == {"ADDENDUM 3.1", "ADDENDUM 3.2", "ADDENDUM 5",
                                                                     "D3", "D4"}
    assert cited_in("(ADDENDUM 2.2, 8.4); S6-S9; D6/S3") == {"ADDENDUM 2.2", "ADDENDUM 8.4", "S6", "S7", "S8", "S9",
                                                            "D6", "S3"}
    assert cited_in("def test_q2_d4_empty_sent_id_prefix_falls_back_to_d3(corpus):") == {"Q2", "D4", "D3"}
    assert cited_in('array("Q"); b"\\x00D1"; ID3 = 1; sha1 S3bucket') == set()


def test_the_decisions_and_addendum_sections_are_each_defined_once_where_expected():
    defined = definitions()
    decisions = {f"D{n}" for n in range(1, 27)} | {f"S{n}" for n in range(1, 15)}
    subsections = {1: 0, 2: 4, 3: 3, 4: 6, 5: 4, 6: 7, 7: 0, 8: 7, 9: 0}
    sections = {f"ADDENDUM {top}" for top in subsections}
    sections |= {f"ADDENDUM {top}.{sub}" for top, count in subsections.items() for sub in range(1, count + 1)}
    quirks = {f"Q{n}" for n in range(1, 21)}
    for ident in decisions:
        assert defined.get(ident) == ["decisions.md"], ident
    for ident in sections | quirks:
        assert defined.get(ident) == ["formats.md"], ident
    assert len(defined_in((DOCS / "decisions.md").read_text(encoding="utf-8"))) == len(decisions)


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation removed, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_links_between_the_docs_pages_resolve():
    pages = sorted(DOCS.rglob("*.md")) + [REPO / "README.md"] + sorted((REPO / "deploy").glob("*.md"))
    for page in pages:
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            file_part, _, anchor = target.partition("#")
            path = (page.parent / file_part).resolve() if file_part else page
            assert path.exists(), f"{page.name}: link to missing {target}"
            if anchor and path.suffix == ".md":
                slugs = {_slug(m) for m in re.findall(r"^#{1,6}\s+(.+)$", path.read_text(encoding="utf-8"), re.M)}
                assert anchor in slugs, f"{page.name}: link to missing anchor {target}"


# Dagster behaviour: `DAGSTER_NOTES 5`, `DAGSTER_NOTES 2 and 10`, `DAGSTER_NOTES §2` -> a heading
# "## DAGSTER_NOTES 5 — ..." of docs/dagster-notes.md.
NOTES_PAGE = DOCS / "dagster-notes.md"
_NOTE_NUMBER = r"§?[0-9]+"
_NOTES = re.compile(rf"\bDAGSTER_NOTES\s+({_NOTE_NUMBER}(?:\s*(?:,|/|\band\b)\s*{_NOTE_NUMBER}\b)*)")


def notes_cited_in(text: str) -> set[str]:
    """The `DAGSTER_NOTES n` a source text cites."""
    return {f"DAGSTER_NOTES {int(n)}" for listed in _NOTES.findall(text) for n in re.findall(r"[0-9]+", listed)}


def notes_defined() -> list[str]:
    return notes_defined_in(NOTES_PAGE.read_text(encoding="utf-8"))


def test_every_dagster_notes_citation_is_a_heading_of_dagster_notes_md():
    missing = undefined(citations(notes_cited_in), notes_defined())
    assert not missing, "DAGSTER_NOTES cited but not a heading of docs/dagster-notes.md:\n" + _listing(missing)


def test_the_notes_scan_finds_the_citations_it_is_meant_to_find():
    cited = citations(notes_cited_in)
    for number in (2, 3, 5, 7, 10):
        assert f"DAGSTER_NOTES {number}" in cited, number
    assert sum(len(places) for places in cited.values()) >= 10


def test_a_made_up_notes_number_is_reported_and_a_real_one_is_not():
    source = "# DAGSTER_NOTES 2 and 42, see also DAGSTER_NOTES §77 / 5; DAGSTER_NOTESX 9, DAGSTER NOTES 8\n"
    cited = {ident: ["example.py:1"] for ident in notes_cited_in(source)}
    assert set(cited) == {"DAGSTER_NOTES 2", "DAGSTER_NOTES 42", "DAGSTER_NOTES 77", "DAGSTER_NOTES 5"}
    assert set(undefined(cited, notes_defined())) == {"DAGSTER_NOTES 42", "DAGSTER_NOTES 77"}


def test_notes_citation_forms():
    assert notes_cited_in("(DAGSTER_NOTES 2 and 10).") == {"DAGSTER_NOTES 2", "DAGSTER_NOTES 10"}
    assert notes_cited_in("DAGSTER_NOTES §5, 7") == {"DAGSTER_NOTES 5", "DAGSTER_NOTES 7"}
    assert notes_cited_in("[DAGSTER_NOTES 3](docs/dagster-notes.md).") == {"DAGSTER_NOTES 3"}
    assert notes_cited_in("the DAGSTER_NOTES file; D2 and 3") == set()


def test_dagster_notes_md_has_each_note_once_in_order_and_only_there():
    assert notes_defined() == [f"DAGSTER_NOTES {n}" for n in range(1, 12)]
    for page in sorted(DOCS.rglob("*.md")):
        if page != NOTES_PAGE:
            assert not notes_defined_in(page.read_text(encoding="utf-8")), page.name


# Sections of the architecture page: `docs/architecture.md "The asset graph"` -> a heading of that
# page containing the quoted text (any case). The bare `ARCHITECTURE "..."` form is held to it too.
ARCHITECTURE_PAGE = DOCS / "architecture.md"
_SECTION_CITE = re.compile(r'\b(?:ARCHITECTURE|architecture\.md),?\s+"([^"]+)"')


def sections_cited_in(text: str) -> set[str]:
    return set(_SECTION_CITE.findall(text))


def unresolved_sections(cited: dict[str, list[str]]) -> dict[str, list[str]]:
    page = ARCHITECTURE_PAGE.read_text(encoding="utf-8")
    headings = [h.lower() for h in re.findall(r"^#{1,6}\s+(.+)$", page, re.M)]
    return {name: places for name, places in cited.items() if not any(name.lower() in h for h in headings)}


def test_every_architecture_section_cited_is_a_heading_of_architecture_md():
    cited = citations(sections_cited_in)
    assert {"The asset graph", "Parts and publish"} <= set(cited)
    missing = unresolved_sections(cited)
    assert not missing, "sections cited but not headings of docs/architecture.md:\n" + _listing(missing)


def test_a_made_up_architecture_section_is_reported():
    source = 'see docs/architecture.md "The asset graph" and ARCHITECTURE "the basement"'
    cited = {name: ["example.py:1"] for name in sections_cited_in(source)}
    assert set(cited) == {"The asset graph", "the basement"}
    assert set(unresolved_sections(cited)) == {"the basement"}
