"""`slm4ie stats`: every dataset in one table, one dataset's summary, or its counts grouped by a field.

The table reads each published manifest only (no document is read), so it costs the same whatever
the corpus size; its characters are summed from the manifest's length histogram (exact below 256
characters a document, within 0.4% above). `--by` streams the published text once (memory: one
counter per distinct value).
"""

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ..catalog import Catalog, DatasetSpec
from ..engine.progress import human_bytes
from ..store.length_stats import LengthHistogram, bucket_bounds
from ..store.manifest import Manifest
from ..store.preview import length_rows
from ..store.published_reader import PublishedVersion
from .look import Ledger, NothingPublished, published, published_documents
from .output import UsageError, json_text, shown
from .select import MISSING_VALUE, Selection, field_values, selected

SHOWN_KEYS = 5  # shard keys the one-dataset summary lists
SHOWN_NAMES = 20  # metadata names a `--by` naming none of them lists


def characters(hist: LengthHistogram) -> int:
    """The characters of all documents, from the histogram: exact buckets below 256, bucket midpoints above."""
    return sum(n * ((lo + hi) // 2) for key, n in hist.buckets for lo, hi in [bucket_bounds(key)])


@dataclass(frozen=True)
class DatasetRow:
    """One line of the corpus table (None: not published); `dropped` leaves out the items the ledger
    counts though their documents were kept (`kept_with_warning`)."""

    dataset: str
    extractor: str
    domain: str
    documents: int | None = None
    characters: int | None = None
    dropped: int | None = None
    annotated_share: float | None = None
    published_at: str | None = None
    kept_with_warning: int | None = None


def dataset_row(spec: DatasetSpec) -> DatasetRow:
    try:
        m = published(spec).manifest
    except NothingPublished:
        return DatasetRow(spec.key, spec.extractor, spec.domain)
    ledger = Ledger.of(m.drops)
    return DatasetRow(spec.key, spec.extractor, spec.domain, m.docs,
                      characters(m.lengths.characters) if m.lengths is not None else None,
                      sum(ledger.dropped.values()), round(m.annotated_docs / m.docs, 4) if m.docs else 0.0,
                      m.published_at, sum(ledger.kept.values()))


def print_table(cells: Sequence[Sequence[str]], left: set[int], indent: str = "") -> None:
    """Columns as wide as their widest cell; those in `left` flush left, numbers flush right."""
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    for row in cells:
        print((indent + "  ".join(c.ljust(w) if i in left else c.rjust(w)
                                  for i, (c, w) in enumerate(zip(row, widths, strict=True)))).rstrip())


def _cell(value, fmt: str = "{:,}") -> str:
    return "-" if value is None else fmt.format(value)


def corpus_table(catalog: Catalog, as_json: bool) -> int:
    rows = [dataset_row(spec) for spec in catalog.datasets.values()]
    if as_json:
        print(json_text({"catalog": str(catalog.path), "datasets": [asdict(r) for r in rows]}, indent=True))
        return 0
    header = ("dataset", "documents", "characters", "dropped", "annotated", "last published")
    cells = [header] + [(shown(r.dataset), _cell(r.documents), _cell(r.characters), _cell(r.dropped),
                         _cell(r.annotated_share, "{:.1%}"), r.published_at or "not published") for r in rows]
    print_table(cells, left={0, 5})
    if not rows:
        print(f"(no datasets in {catalog.path})")
    return 0


def stats(catalog: Catalog, spec: DatasetSpec | None, args: argparse.Namespace) -> int:
    if spec is None:
        return corpus_table(catalog, args.json)
    try:
        version = published(spec)
    except NothingPublished as exc:
        print(f"slm4ie: {exc}", file=sys.stderr)
        return 1
    if args.by is not None:
        return grouped(spec, version, args.by, args.json)
    if args.json:
        row = asdict(dataset_row(spec))
        print(json_text({**row, "manifest": version.manifest}, indent=True))
        return 0
    print_summary(spec, version.manifest)
    return 0


def grouped(spec: DatasetSpec, version: PublishedVersion, by: tuple[str, ...], as_json: bool) -> int:
    """Documents, characters and annotated documents per value of a field (a list counts per element)."""
    docs: Counter[str] = Counter()
    chars: Counter[str] = Counter()
    annotated: Counter[str] = Counter()
    metadata_names: set[str] = set()
    for _number, rec, ann in selected(published_documents(version), Selection()):
        if len(metadata_names) < SHOWN_NAMES:
            metadata_names.update(rec.get("metadata", ()))
        for value in field_values(rec, by):
            docs[value] += 1
            chars[value] += len(rec["text"])
            annotated[value] += ann is not None and "forms" in ann
    field = ".".join(by)
    if list(docs) == [MISSING_VALUE]:  # a misspelt name, most likely: say so rather than a table of nothing
        names = ", ".join(f"metadata.{n}" for n in sorted(metadata_names)[:SHOWN_NAMES]) or "no metadata"
        raise UsageError(f"slm4ie stats: no document of {spec.key} has {field} (its documents have {names})")
    groups = [{"value": v, "documents": n, "characters": chars[v], "annotated": annotated[v]}
              for v, n in sorted(docs.items(), key=lambda item: (-item[1], item[0]))]
    if as_json:
        print(json_text({"dataset": spec.key, "by": field, "groups": groups}, indent=True))
        return 0
    cells = [(shown(field), "documents", "characters", "annotated")] + [
        (shown(g["value"]), f"{g['documents']:,}", f"{g['characters']:,}", f"{g['annotated']:,}") for g in groups]
    print(shown(f"{spec.key}: {version.manifest.docs:,} documents by {field}"))
    print_table(cells, left={0}, indent="  ")
    return 0


def print_summary(spec: DatasetSpec, m: Manifest) -> None:
    rows = [("published", m.published_at), ("shards", f"{len(m.shards):,}"), ("files", f"{m.files:,}"),
            ("documents", f"{m.docs:,}"),
            ("annotated", f"{m.annotated_docs:,} ({100 * m.annotated_docs / m.docs:.1f}%)" if m.docs else "0"),
            ("tokens", f"{m.tokens:,}"), ("sentences", f"{m.sentences:,}"), ("text", human_bytes(m.text_bytes)),
            ("sidecar", human_bytes(m.sidecar_bytes) if m.has_sidecar else "none (no annotated document)"),
            ("duplicate uids", f"{m.duplicate_uids:,}")]
    ledger = Ledger.of(m.drops)
    rows += [("dropped", f"{sum(ledger.dropped.values()):,}")]
    rows += [(f"  {reason}", f"{n:,}") for reason, n in ledger.dropped.items()]
    if ledger.kept:
        rows += [("kept with a warning", f"{sum(ledger.kept.values()):,}")]
        rows += [(f"  {reason}", f"{n:,}") for reason, n in ledger.kept.items()]
    rows += [(f"repaired: {reason}", f"{n:,}") for reason, n in m.repairs.items()]
    width = max(len(label) for label, _ in rows)
    print(shown(f"{spec.key} ({spec.extractor}, {spec.domain})"))
    print("\n".join(f"  {label:<{width}}  {value}" for label, value in rows))
    keys = [shown(key) for key, _ in m.shards]
    print("\nshard keys (for inspect --shard): " + ", ".join(keys[:SHOWN_KEYS])
          + (f" … and {len(keys) - SHOWN_KEYS:,} more" if len(keys) > SHOWN_KEYS else ""))
    print_lengths(m)


def print_lengths(m: Manifest) -> None:
    if m.lengths is None:
        print("\nlength distributions: not recorded for this version (publish again with --force)")
        return
    table = length_rows(m.lengths.characters, m.lengths.tokens)
    if not table:
        return
    columns = [c for c in table[0] if c != "measure"]
    print("\n  " + f"{'':<30}" + "".join(f"{c:>10}" for c in columns))
    for row in table:
        print("  " + f"{row['measure']:<30}" + "".join(f"{row[c]:>10,}" if isinstance(row[c], int) else
                                                        f"{row[c]:>10}" for c in columns))
