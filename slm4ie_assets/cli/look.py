"""`slm4ie inspect` and `slm4ie stats`: read the published version (or one shard's part) and print.

Nothing here writes: the version is pinned by resolving `current` once, so a publish running
meanwhile cannot mix two versions into one listing.
"""

import argparse
import gzip
import itertools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from ..catalog import DatasetSpec
from ..manifest import Manifest
from ..preview import length_rows
from ..progress import human_bytes
from ..store import READ_ERRORS, DatasetStore, read_manifest

TEXT_CHARS = 1200  # of one document's text; the rest is counted, not printed
SHOWN_KEYS = 5  # shard keys `stats` lists


class NothingPublished(Exception):
    """The dataset has no published version (or no such shard part) to read."""


@dataclass(frozen=True)
class Published:
    """One published version: its folder and manifest."""

    folder: Path
    manifest: Manifest


def published(spec: DatasetSpec) -> Published:
    store = DatasetStore(spec)
    try:
        folder = Path(os.path.realpath(store.current, strict=True))
        return Published(folder, read_manifest(folder))
    except READ_ERRORS:
        raise NothingPublished(f"{spec.key} has no published version under {spec.output_dir} yet "
                               f"(slm4ie extract {spec.key}, or materialize extracted/{spec.key})") from None


def inspect(spec: DatasetSpec, args: argparse.Namespace) -> int:
    try:
        if args.dropped:
            print_dropped(spec, published(spec))
        elif args.shard is not None:
            print_documents(shard_documents(spec, args.shard), args.skip, args.n, args.annotated)
        else:
            print_documents(published_documents(spec, published(spec)), args.skip, args.n, args.annotated)
    except NothingPublished as exc:
        print(f"slm4ie: {exc}", file=sys.stderr)
        return 1
    return 0


def _pairs(text: Path, sidecar: Path | None) -> Iterator[tuple[dict, dict | None]]:
    """Text records with the sidecar line of the same number (None without a sidecar)."""
    with open(text, "rb") as t, (gzip.open(sidecar, "rb") if sidecar else open(os.devnull, "rb")) as s:
        side = iter(s) if sidecar else itertools.repeat(None)
        for line, ann in zip(t, side, strict=False):
            yield orjson.loads(line), (orjson.loads(ann) if ann is not None else None)


def published_documents(spec: DatasetSpec, version: Published) -> Iterator[tuple[dict, dict | None]]:
    side = version.folder / spec.sidecar_path.name
    return _pairs(version.folder / spec.text_path.name, side if side.exists() else None)


def shard_documents(spec: DatasetSpec, shard: str) -> Iterator[tuple[dict, dict | None]]:
    store = DatasetStore(spec)
    meta = store.read_part_meta(shard)
    if meta is None or meta.shard != shard:
        raise NothingPublished(f"{spec.key} has no part for shard {shard!r} (shard keys are paths under "
                               f"{spec.raw_dir}; `slm4ie stats {spec.key}` lists the published ones)")
    paths = store.part_paths(shard)
    # once a part has a sidecar it has a line per document (stubs back-filled), like the published one
    return _pairs(paths.text, paths.annotations if meta.has_annotations else None)


def print_documents(docs: Iterator[tuple[dict, dict | None]], skip: int, n: int, annotated: bool) -> None:
    """`#N` is the document's line in the file read (the published text, or the shard's part)."""
    numbered = ((number, rec, ann) for number, (rec, ann) in enumerate(docs, 1)
                if not annotated or (ann is not None and "forms" in ann))
    shown = 0
    for number, rec, ann in itertools.islice(numbered, skip, skip + n):
        shown += 1
        print(f"#{number}  {rec['uid']}  ({len(rec['text']):,} characters)")
        if rec.get("metadata"):
            print("  metadata: " + orjson.dumps(rec["metadata"]).decode())
        text = rec["text"]
        rest = len(text) - TEXT_CHARS
        for line in text[:TEXT_CHARS].split("\n"):
            print(f"  | {line}")
        if rest > 0:
            print(f"  | … {rest:,} more characters")
        if ann is not None and "forms" in ann:
            print_tokens(ann)
        print()
    if not shown:
        print("(no documents" + (" with annotations" if annotated else "") + (f" after {skip}" if skip else "") + ")")


def print_tokens(ann: dict) -> None:
    """One line per sentence: form/lemma/UPOS for each token."""
    for number, (start, end) in enumerate(ann["sentences"], 1):
        tokens = [f"{ann['forms'][i]}/{ann['lemmas'][i] or '_'}/{ann['upos'][i] or '_'}" for i in range(start, end + 1)]
        print(f"  s{number}: " + " ".join(tokens))


def print_dropped(spec: DatasetSpec, version: Published) -> None:
    """The drop ledger of the published version, then each part's warnings (file:line, reason)."""
    m = version.manifest
    print(f"{spec.key}: {sum(m.drops.values()):,} item(s) dropped" +
          (": " + ", ".join(f"{k} {v:,}" for k, v in m.drops.items()) if m.drops else ""))
    for warning in m.discovery_warnings:
        print(f"  {warning}")
    store = DatasetStore(spec)
    for key, fingerprint in m.shards:
        meta = store.read_part_meta(key)
        if meta is None or meta.fingerprint != fingerprint:
            print(f"  {key}: its part changed since this version was published (warnings not shown)")
        elif meta.warnings:
            for warning in meta.warnings:
                print(f"  {warning}")
            kept = sum(meta.drops.values())
            if kept > len(meta.warnings):
                print(f"  {key}: … {kept - len(meta.warnings):,} more (a part keeps its first {len(meta.warnings)})")


def stats(spec: DatasetSpec) -> int:
    try:
        version = published(spec)
    except NothingPublished as exc:
        print(f"slm4ie: {exc}", file=sys.stderr)
        return 1
    m = version.manifest
    rows = [("published", m.published_at), ("shards", f"{len(m.shards):,}"), ("files", f"{m.files:,}"),
            ("documents", f"{m.docs:,}"),
            ("annotated", f"{m.annotated_docs:,} ({100 * m.annotated_docs / m.docs:.1f}%)" if m.docs else "0"),
            ("tokens", f"{m.tokens:,}"), ("sentences", f"{m.sentences:,}"), ("text", human_bytes(m.text_bytes)),
            ("sidecar", human_bytes(m.sidecar_bytes) if m.has_sidecar else "none (no annotated document)"),
            ("duplicate uids", f"{m.duplicate_uids:,}"), ("dropped", f"{sum(m.drops.values()):,}")]
    rows += [(f"  {reason}", f"{n:,}") for reason, n in m.drops.items()]
    rows += [(f"repaired: {reason}", f"{n:,}") for reason, n in m.repairs.items()]
    width = max(len(label) for label, _ in rows)
    print(f"{spec.key} ({spec.extractor}, {spec.domain})")
    print("\n".join(f"  {label:<{width}}  {value}" for label, value in rows))
    keys = [key for key, _ in m.shards]
    print("\nshard keys (for inspect --shard): " + ", ".join(keys[:SHOWN_KEYS])
          + (f" … and {len(keys) - SHOWN_KEYS:,} more" if len(keys) > SHOWN_KEYS else ""))
    print_lengths(m)
    return 0


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
