"""What a published dataset looks like: a sample of documents and its length distributions.

The sample is the SAMPLE_DOCS documents whose uids have the smallest 64-bit hashes (the hashes
the parts already store for duplicate counting, duplicates.uid_hash), ties broken by position, so a
uid that repeats is sampled with its copies rather than once. A uid's hash does not depend on where
the document sits, so the sample is spread over the whole dataset and is the same for every worker
count, grouping and re-run (D2). Only the `.uids` files are read in full; of the text
and sidecar parts, only the lines up to the last sampled one, and only those lines are decoded.
"""

import gzip
import heapq
from array import array
from dataclasses import dataclass
from pathlib import Path

import orjson

from ..catalog import DatasetSpec
from ..schema import Token
from .dataset_store import READ_ERRORS, DatasetStore
from .duplicates import uid_hash
from .length_stats import PERCENTILES, LengthHistogram
from .manifest import Manifest
from .part_meta import PartMeta

SAMPLE_DOCS = 5
SAMPLE_TOKENS = 12  # first tokens shown per annotated document
_NUMPY_FROM = 250_000  # hashes per part above which numpy's partition beats a Python set


@dataclass(frozen=True, slots=True)
class SampledDocument:
    uid_hash: int
    shard: str  # the shard key of its part
    line: int  # 0-based line in its part
    published_line: int | None  # 0-based line in the published text (None after an unsampled part)
    doc_id: str
    text: str
    token_count: int  # 0 for a document without annotations
    first_tokens: tuple[Token, ...]


@dataclass(frozen=True, slots=True)
class Sample:
    documents: tuple[SampledDocument, ...]  # in document order (shard order, then line)
    unsampled_shards: int  # parts that no longer match the manifest (re-extracted since the publish)


def smallest_hashes(path: Path, k: int) -> list[tuple[int, int]]:
    """The `k` smallest (hash, line) pairs of a `.uids` file, by hash then line: every copy of a
    repeated uid is a document of its own, so each can be sampled."""
    hashes = array("Q")
    with open(path, "rb") as fh:
        hashes.frombytes(fh.read())
    if len(hashes) > _NUMPY_FROM:
        return _smallest_numpy(path, k)
    best = set(heapq.nsmallest(k, set(hashes)))
    # every line of the k smallest distinct hashes holds the k smallest pairs
    return sorted((h, line) for line, h in enumerate(hashes) if h in best)[:k]


def _smallest_numpy(path: Path, k: int) -> list[tuple[int, int]]:
    """As `smallest_hashes`, in O(n): the lines whose hash is at most the k-th smallest value hold
    the k smallest pairs."""
    import numpy as np

    arr = np.fromfile(path, dtype=np.uint64)
    if not arr.size or k <= 0:
        return []
    m = min(arr.size, k)
    cut = np.partition(arr, m - 1)[m - 1]
    lines = np.flatnonzero(arr <= cut)
    values = arr[lines]
    order = np.lexsort((lines, values))[:k]
    return [(int(values[j]), int(lines[j])) for j in order]


def sample_documents(spec: DatasetSpec, manifest: Manifest, k: int = SAMPLE_DOCS) -> Sample:
    """The `k` documents of the published version with the smallest uid hashes, read from the
    parts that the manifest lists (a part re-extracted since then is left out and counted)."""
    store = DatasetStore(spec)
    metas: list[tuple[PartMeta, int | None]] = []  # each sampled part, with its first published line
    candidates: list[tuple[int, int, int]] = []  # (hash, index in metas, line)
    unsampled = 0
    offset: int | None = 0
    for key, fingerprint in manifest.shards:
        meta = store.read_part_meta(key)
        if meta is None or meta.fingerprint != fingerprint or meta.recipe != manifest.recipe:
            unsampled += 1
            offset = None
            continue
        try:
            found = smallest_hashes(store.part_paths(key).uids, k) if meta.docs else []
        except READ_ERRORS:
            found = []
            unsampled += 1
        candidates.extend((h, len(metas), line) for h, line in found)
        metas.append((meta, offset))
        offset = None if offset is None else offset + meta.docs
    chosen = sorted(candidates)[:k]  # by hash, then part order and line: repeats of a uid included
    documents: list[SampledDocument] = []
    for index, (meta, first_line) in enumerate(metas):
        wanted = {line: h for h, i, line in chosen if i == index}
        if wanted:
            documents.extend(_read_lines(store, meta, first_line, wanted))
    return Sample(tuple(documents), unsampled)


def _read_lines(store: DatasetStore, meta: PartMeta, first_line: int | None,
                wanted: dict[int, int]) -> list[SampledDocument]:
    """Decode the wanted lines of one part (text and, beside it, the sidecar part); a line whose uid
    no longer has the expected hash (the part was replaced meanwhile) is left out."""
    paths = store.part_paths(meta.shard)
    last = max(wanted)
    out: list[SampledDocument] = []
    side = None
    try:
        side = gzip.open(paths.annotations, "rb") if meta.has_annotations else None
        with open(paths.text, "rb") as text_fh:
            for line_no, line in enumerate(text_fh):
                side_line = next(side, b"{}") if side is not None else b"{}"
                if line_no in wanted:
                    at = None if first_line is None else first_line + line_no
                    doc = _sampled(meta.shard, line_no, at, wanted[line_no], line, side_line)
                    if doc is not None:
                        out.append(doc)
                if line_no >= last:
                    break
    except READ_ERRORS + (EOFError, gzip.BadGzipFile):
        return out
    finally:
        if side is not None:
            side.close()
    return out


def _sampled(shard: str, line_no: int, published_line: int | None, expected: int, line: bytes,
             side_line: bytes) -> SampledDocument | None:
    rec = orjson.loads(line)
    if uid_hash(rec["uid"]) != expected:
        return None
    ann = orjson.loads(side_line)
    forms = ann.get("forms") or []
    n = min(len(forms), SAMPLE_TOKENS)
    tokens = tuple(Token(forms[i], ann["lemmas"][i], ann["upos"][i], ann["feats"][i], ann["space_after"][i])
                   for i in range(n))
    return SampledDocument(expected, shard, line_no, published_line, rec["doc_id"], rec["text"], len(forms), tokens)


# ----------------------------------------------------------------------------- rendering

PREVIEW_CHARS = 240


def _cell(value: str | None) -> str:
    return "—" if value is None else (value.replace("|", "\\|").replace("\n", "⏎") or "␣")


def _shorten(text: str, limit: int = PREVIEW_CHARS) -> str:
    return text[:limit].replace("\n", " ⏎ ") + ("…" if len(text) > limit else "")


def sample_markdown(sample: Sample, total_docs: int, text_name: str = "the text") -> str:
    """One list item per sampled document; for an annotated one, a table of its first tokens."""
    if not sample.documents:
        return "(no documents)"
    head = (f"{len(sample.documents)} of {total_docs} documents: those with the smallest uid hashes "
            "(a fixed, spread-out sample, the same on every run), in document order.")
    items = [head, ""]
    for d in sample.documents:
        items.append(f"- **{d.doc_id}**: {_shorten(d.text)}")
        # a paragraph of its own inside the list item: the UI's markdown strips `<br>`, and the text
        # would run into this line
        where = f"line {d.published_line + 1} of {text_name}, " if d.published_line is not None else ""
        items.append("")
        items.append(f"  {where}shard `{d.shard}` line {d.line + 1}; {len(d.text)} characters"
                     + (f", {d.token_count} tokens" if d.token_count else ", no annotations"))
        if d.first_tokens:
            items += ["", "  | form | lemma | upos |", "  |---|---|---|"]
            items += [f"  | {_cell(t.form)} | {_cell(t.lemma)} | {_cell(t.upos)} |" for t in d.first_tokens]
            if d.token_count > len(d.first_tokens):
                items.append(f"\n  …and {d.token_count - len(d.first_tokens)} more tokens")
            items.append("")
    if sample.unsampled_shards:
        items.append(f"\n({sample.unsampled_shards} shard(s) re-extracted since this version was published "
                     "are not sampled)")
    return "\n".join(items)


def length_rows(characters: LengthHistogram, tokens: LengthHistogram) -> list[dict[str, int | str]]:
    """Rows of the length-distribution table: min, nearest-rank percentiles, max (length_stats)."""
    rows: list[dict[str, int | str]] = []
    for measure, h in (("characters per document", characters), ("tokens per annotated document", tokens)):
        if not h.count:
            continue
        row: dict[str, int | str] = {"measure": measure, "documents": h.count, "min": h.min}
        row.update({f"p{q}": h.percentile(q) for q in PERCENTILES})
        row["max"] = h.max
        rows.append(row)
    return rows
