"""Every rule identifier the code and tests cite (D6, S14, Q16, ADDENDUM 4.1, test_d6_..., test_addendum_5_3_...)
is defined in docs/ as a heading or a bold anchor, so a clone can resolve it (issue 13 item 4)."""

import re
from collections import defaultdict
from pathlib import Path


def _repo_root() -> Path:
    for folder in Path(__file__).resolve().parents:
        if (folder / "pyproject.toml").is_file() and (folder / "slm4ie_assets").is_dir():
            return folder
    raise RuntimeError("repository root not found above " + __file__)


REPO = _repo_root()
DOCS = REPO / "docs"
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

# Definitions: a heading that starts with the identifier, or a bold anchor opening a (list) line.
_IDENT = r"(?:[DSQ][0-9]+|ADDENDUM [0-9]+(?:\.[0-9]+)*)"
_HEADING = re.compile(rf"^#{{1,6}}\s+({_IDENT})(?![0-9.]*[0-9])")
_ANCHOR = re.compile(rf"^\s*(?:[-*]\s+)?\*\*({_IDENT})\.?\*\*")


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


def defined_in(markdown: str) -> list[str]:
    """The identifiers a docs page defines, in order (repeats kept, to detect them)."""
    out = []
    for line in markdown.splitlines():
        match = _HEADING.match(line) or _ANCHOR.match(line)
        if match:
            out.append(match.group(1))
    return out


def source_files() -> list[Path]:
    files = [REPO / "README.md"]
    for folder in ("slm4ie_assets", "tests", "bench"):
        files.extend(sorted((REPO / folder).rglob("*.py")))
    return [f for f in files if f.resolve() != THIS_FILE]


def citations() -> dict[str, list[str]]:
    """identifier -> the `path:line` places citing it."""
    where = defaultdict(list)
    for path in source_files():
        rel = path.relative_to(REPO)
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for ident in cited_in(line):
                where[ident].append(f"{rel}:{lineno}")
    return where


def definitions() -> dict[str, list[str]]:
    """identifier -> the docs pages defining it."""
    pages = defaultdict(list)
    for page in sorted(DOCS.rglob("*.md")):
        for ident in defined_in(page.read_text(encoding="utf-8")):
            pages[ident].append(page.name)
    return pages


def undefined(cited: dict[str, list[str]], defined: dict[str, list[str]]) -> dict[str, list[str]]:
    return {ident: places for ident, places in cited.items() if ident not in defined}


def test_every_identifier_cited_in_code_tests_and_bench_is_defined_in_docs():
    cited = citations()
    missing = undefined(cited, definitions())
    assert not missing, "rule identifiers cited but defined nowhere in docs/ (add a heading):\n" + "\n".join(
        f"  {ident}: {', '.join(places[:3])}{' ...' if len(places) > 3 else ''}"
        for ident, places in sorted(missing.items()))


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
    decisions = {f"D{n}" for n in range(1, 23)} | {f"S{n}" for n in range(1, 15)}
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
    pages = sorted(DOCS.rglob("*.md")) + [REPO / "README.md"]
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
