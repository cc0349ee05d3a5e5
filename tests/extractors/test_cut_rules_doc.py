"""docs/splitting.md's table of formats (format, splitter, carry, where a range starts) is derived from
the registry's splitters: a format made splittable, a splitter moved or a cut rule reworded fails here,
naming the row to write, until the page says so."""

from slm4ie_assets.extractors.splitting import Splitter
from support.paths import REPO
from support.splitters import splitters

DOC = REPO / "docs" / "splitting.md"
HEADER = "| extractor | splitter (module) | carry | a range starts |"


def row_of(name: str, splitter: Splitter) -> str:
    """The table row the code says `name` should have."""
    cls = type(splitter)
    module = cls.__module__.removeprefix("slm4ie_assets.extractors.").replace(".", "/") + ".py"
    carry = f"`{splitter.carry.__name__}`" if splitter.carry is not None else "—"
    return f"| {name} | `{cls.__name__}` (`{module}`) | {carry} | {cls.cut_rule} |"


def doc_rows(text: str) -> list[str]:
    """The rows of the table under `HEADER`, up to the first line that is not a row."""
    lines = text.split(HEADER, 1)[1].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append(line.strip())
    return rows


def test_every_splitter_states_its_own_cut_rule():
    for name, splitter in splitters().items():
        cls = type(splitter)
        assert "cut_rule" in vars(cls) and cls.cut_rule.strip(), (
            f"{cls.__module__}.{cls.__name__} (the splitter of {name}) sets no `cut_rule` of its own: "
            "say where a range starts, in words, as docs/splitting.md's table of formats shows it")


def mismatch(text: str) -> str | None:
    """What to fix in `text`'s table of formats, or None when it is the code's."""
    if HEADER not in text:
        return f"{DOC.name} has lost its table of formats ({HEADER})"
    written = doc_rows(text)
    expected = [row_of(name, splitter) for name, splitter in splitters().items()]
    wrong = [row for row in expected if row not in written]
    stale = [row for row in written if row not in expected]
    if wrong or stale:
        return (f"{DOC.name}'s table of formats is not the code's: write the rows\n" + "\n".join(wrong)
                + "\nin place of\n" + "\n".join(stale))
    if written != expected:
        return f"{DOC.name}'s table of formats is not in the registry's order:\n" + "\n".join(expected)
    return None


def test_the_table_of_formats_is_the_registrys_splitters():
    problem = mismatch(DOC.read_text(encoding="utf-8"))
    assert problem is None, problem


def test_the_check_fails_on_a_reworded_rule_a_missing_row_and_another_order():
    expected = [row_of(name, splitter) for name, splitter in splitters().items()]
    assert len(expected) >= 2

    def page(rows: list[str]) -> str:
        return f"{HEADER}\n|---|---|---|---|\n" + "\n".join(rows) + "\n\nprose"

    assert mismatch(page(expected)) is None
    reworded = [expected[0].replace(" | ", " | x", 1), *expected[1:]]
    assert expected[0] in mismatch(page(reworded))
    assert expected[-1] in mismatch(page(expected[:-1]))
    assert "order" in mismatch(page(expected[::-1]))
