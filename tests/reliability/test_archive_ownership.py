"""Unpacking never replaces or deletes a file that no archive produced (issue 39, case 1; D16).

Before (55def41): `raw/t/` holding the user's `a.txt` and `root.tar = {a.txt}` came out of
`slm4ie extract t` with the archive's text in `a.txt`, no warning, no drop; and a root that then
breached its budget rolled `a.txt` back as one of its outputs, so the user's text was lost. Now a
member whose path holds a file the archive state does not record as an archive's output is refused:
the root is a counted `bad_archive` skip naming the root, the member and the file, and the user's
file and its documents stay. A file that already holds exactly the member's bytes is taken as it is
(nothing is replaced), and stays the user's: no roll-back and no newer version removes it. Real
archives in tmp_path, unpacked by the real pipeline."""

import gzip
import lzma
from pathlib import Path

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
from support.archive_files import files_under, tar_of
from support.files import read_jsonl, write_config, write_files

USER_TEXT = b"moje lastno besedilo, popravljeno na roke\n"
ARCHIVE_TEXT = b"besedilo iz arhiva\n"
INNER_TEXT = b"".join(f"Dober dan, to je vrstica {i:05d} besedila.\n".encode() for i in range(1000))
NESTED = 30


def catalog_for(tmp_path: Path, **archives):
    return load_catalog(write_config(tmp_path, {"t": {"extractor": "text", "domain": "test"}},
                                     **({"archives": archives} if archives else {})))


def published_texts(tmp_path: Path) -> list[str]:
    return sorted(r["text"] for r in read_jsonl(tmp_path / "out" / "t.jsonl"))


def with_nested_bomb(first: dict[str, bytes]) -> tuple[bytes, float]:
    """A tar.xz of `first` and NESTED .txt.gz members, and a max_ratio under which the root and
    its gz members fit the root's budget, the text in them does not."""
    inner = gzip.compress(INNER_TEXT, mtime=0)
    root = lzma.compress(tar_of({**first, **{f"part{i:02d}.txt.gz": inner for i in range(NESTED)}}))
    depth_one = sum(map(len, first.values())) + NESTED * len(inner)
    ratio = 2 * depth_one / len(root)
    assert ratio * len(root) < NESTED * len(INNER_TEXT) / 4
    return root, ratio


def test_a_member_is_refused_where_a_users_own_file_stands(tmp_path):
    raw = tmp_path / "raw" / "t"
    write_files(raw, {"a.txt": USER_TEXT, "root.tar": tar_of({"a.txt": ARCHIVE_TEXT, "b.txt": b"drugi\n"})})
    catalog = catalog_for(tmp_path)
    lines: list[str] = []
    report = extract_dataset(catalog.dataset("t"), catalog, log=lines.append)

    assert (raw / "a.txt").read_bytes() == USER_TEXT, "the user's file was replaced"
    assert files_under(raw) == {"a.txt", "root.tar"}, "nothing of the refused root is left"
    assert report.manifest is not None and report.manifest.drops == {"bad_archive": 1}
    warning = next(line for line in lines if line.startswith("WARNING t/root.tar: skipped"))
    assert "member 'a.txt'" in warning and "t/a.txt" in warning and "no archive produced" in warning, warning
    assert published_texts(tmp_path) == [USER_TEXT.decode().strip()]

    # unchanged, it is reported again without being read; once the user's file is gone, it unpacks
    again: list[str] = []
    assert extract_dataset(catalog.dataset("t"), catalog, log=again.append).manifest.drops == {"bad_archive": 1}
    assert any("t/root.tar: skipped" in line and "unchanged since the last try" in line for line in again)
    (raw / "a.txt").unlink()
    done = extract_dataset(catalog.dataset("t"), catalog)
    assert done.manifest is not None and done.manifest.drops == {}
    assert published_texts(tmp_path) == ["besedilo iz arhiva", "drugi"]


def test_a_member_of_a_nested_archive_is_refused_too_and_the_root_rolled_back(tmp_path):
    raw = tmp_path / "raw" / "t"
    inner = gzip.compress(tar_of({"sub/a.txt": ARCHIVE_TEXT}))
    write_files(raw, {"sub/a.txt": USER_TEXT, "root.tar": tar_of({"x.txt": b"x\n", "inner.tar.gz": inner})})
    catalog = catalog_for(tmp_path)
    lines: list[str] = []
    report = extract_dataset(catalog.dataset("t"), catalog, log=lines.append)

    assert (raw / "sub" / "a.txt").read_bytes() == USER_TEXT
    assert files_under(raw) == {"sub/a.txt", "root.tar"}, "the root's tree is rolled back"
    assert report.manifest is not None and report.manifest.drops == {"bad_archive": 1}
    warning = next(line for line in lines if line.startswith("WARNING t/root.tar: skipped"))
    assert "member 'sub/a.txt' of t/inner.tar.gz" in warning and "t/sub/a.txt" in warning, warning
    assert published_texts(tmp_path) == [USER_TEXT.decode().strip()]


def test_a_budget_breach_removes_only_what_the_root_produced(tmp_path):
    """The user's `a.txt` holds exactly the root's member: it is taken as it is, and the roll-back
    of the breach that follows leaves it (before: removed as one of the root's outputs)."""
    raw = tmp_path / "raw" / "t"
    root, ratio = with_nested_bomb({"a.txt": USER_TEXT})
    write_files(raw, {"a.txt": USER_TEXT, "root.tar.xz": root})
    catalog = catalog_for(tmp_path, max_ratio=ratio)
    lines: list[str] = []
    report = extract_dataset(catalog.dataset("t"), catalog, log=lines.append)

    assert report.manifest is not None and report.manifest.drops == {"bad_archive": 1}
    assert any(line.startswith("WARNING t/root.tar.xz: skipped") and "at any depth" in line for line in lines)
    assert files_under(raw) == {"a.txt", "root.tar.xz"}, "the user's file stays, all the root made is gone"
    assert (raw / "a.txt").read_bytes() == USER_TEXT
    assert published_texts(tmp_path) == [USER_TEXT.decode().strip()]


def test_a_user_file_that_differs_is_refused_before_any_budget_is_spent(tmp_path):
    """The issue's second reproduction: the user's own `a.txt` and a root of `a.txt` and 30 nested
    .txt.gz that breach its budget. Before, the member replaced `a.txt` and the roll-back deleted it."""
    raw = tmp_path / "raw" / "t"
    root, ratio = with_nested_bomb({"a.txt": ARCHIVE_TEXT})
    write_files(raw, {"a.txt": USER_TEXT, "root.tar.xz": root})
    catalog = catalog_for(tmp_path, max_ratio=ratio)
    report = extract_dataset(catalog.dataset("t"), catalog)

    assert report.manifest is not None and report.manifest.drops == {"bad_archive": 1}
    assert files_under(raw) == {"a.txt", "root.tar.xz"}
    assert (raw / "a.txt").read_bytes() == USER_TEXT
    assert published_texts(tmp_path) == [USER_TEXT.decode().strip()]


def test_outputs_of_a_lost_state_are_taken_back_as_they_are(tmp_path):
    """Deleting `out/` (and the archive state with it) leaves every unpacked file in raw/ without a
    record: each holds exactly its member, so the next run takes it back, nothing is refused."""
    raw = tmp_path / "raw" / "t"
    write_files(raw, {"root.tar": tar_of({"a.txt": ARCHIVE_TEXT, "in.txt.gz": gzip.compress(b"notri\n", mtime=0)})})
    catalog = catalog_for(tmp_path)
    first = extract_dataset(catalog.dataset("t"), catalog)
    assert first.manifest is not None and first.manifest.drops == {}
    before = {rel: (raw / rel).stat().st_mtime_ns for rel in files_under(raw)}
    (tmp_path / "out" / ".slm4ie" / "t" / "archives.json").unlink()
    again = extract_dataset(catalog.dataset("t"), catalog)
    assert again.manifest is not None and again.manifest.drops == {}
    assert {rel: (raw / rel).stat().st_mtime_ns for rel in files_under(raw)} == before, "nothing was rewritten"
    assert published_texts(tmp_path) == ["besedilo iz arhiva", "notri"]
