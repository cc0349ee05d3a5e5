"""Asset checks on `extracted/<key>`, computed from the published files themselves.

One pass streams the text file and the sidecar side by side, so the checks verify the bytes a
consumer reads, not what the publish step believes it wrote:
  - sidecar_aligned (ERROR): the sidecar exists exactly when the manifest says so, has one line per
    text line, and line n carries the same doc_id and uid as text line n (ADDENDUM 2.2, 8.4);
  - valid_schema (ERROR): every line is valid JSON (D1) with the keys and types of ADDENDUM 2.1/2.2
    in that order, non-blank string text (D7), uid = source:doc_id;
  - unique_uids (WARN, D5): from the duplicate count the publish step took over all uids;
  - no_drops (WARN, D6): the drop ledger of the published version is empty;
  - sentences_match_text (WARN): on annotated documents, each sentence rebuilt from its forms and
    space_after equals the document text, sentence by sentence (dagster_layer/sentence_check.py defines it).
The version is pinned once (store/published_reader.py), so a concurrent publish cannot mix two
versions. In a bucket that is the newest commit record's version objects, the pair a reader
following the manifest gets, not the top-level copies (which settle, not the checks, keeps whole).
"""

import gzip
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import orjson
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AutomationCondition,
    MetadataValue,
    multi_asset_check,
)

from ..catalog import DatasetSpec
from ..store.dataset_store import READ_ERRORS
from ..store.manifest import Manifest
from ..store.published_reader import published_version
from .assets import extracted_key
from .sentence_check import SentenceFindings, joins_with_newlines

ALIGNED = "sidecar_aligned"
SCHEMA = "valid_schema"
UNIQUE = "unique_uids"
DROPS = "no_drops"
SENTENCES = "sentences_match_text"
BLOCKING = "blocking"  # a failure stops assets downstream from materializing
WARNING = "warning"  # a failure is reported, nothing is held back
EXAMPLES = 5

TEXT_KEYS = ("text", "source", "domain", "doc_id", "uid")
TEXT_KEYS_META = TEXT_KEYS + ("metadata",)
ANN_KEYS = ("doc_id", "uid", "forms", "lemmas", "upos", "feats", "space_after", "sentences")
STUB_KEYS = ("doc_id", "uid")
_STR = {str}
_STR_OR_NULL = {str, type(None)}
_BOOL = {bool}


@dataclass
class Problems:
    """Count and first few descriptions of one check's failures."""

    count: int = 0
    examples: list = field(default_factory=list)

    def add(self, message: str) -> None:
        self.count += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(message)


@dataclass
class Findings:
    published: bool
    text_lines: int = 0
    sidecar_lines: int = 0
    has_sidecar: bool = False
    manifest: Manifest | None = None
    aligned: Problems = field(default_factory=Problems)
    schema: Problems = field(default_factory=Problems)
    sentences: SentenceFindings = field(default_factory=SentenceFindings)


def _text_problem(rec, spec: DatasetSpec) -> str | None:
    if type(rec) is not dict:
        return f"is a JSON {type(rec).__name__}, not an object"
    keys = tuple(rec)
    if keys != TEXT_KEYS and keys != TEXT_KEYS_META:
        return f"keys {list(keys)} are not {list(TEXT_KEYS)} (+ metadata) in that order"
    text, doc_id = rec["text"], rec["doc_id"]
    if type(text) is not str or not text.strip():
        return "text is not a non-blank string"
    if rec["source"] != spec.key or rec["domain"] != spec.domain:
        return f"source/domain {rec['source']!r}/{rec['domain']!r} are not {spec.key!r}/{spec.domain!r}"
    if type(doc_id) is not str or rec["uid"] != f"{spec.key}:{doc_id}":
        return f"uid {rec['uid']!r} is not source:doc_id"
    if len(keys) == 6 and (type(rec["metadata"]) is not dict or not rec["metadata"]):
        return "metadata is present but not a non-empty object"
    return None


def _ann_problem(rec) -> str | None:
    if type(rec) is not dict:
        return f"is a JSON {type(rec).__name__}, not an object"
    keys = tuple(rec)
    if keys == STUB_KEYS:
        return None
    if keys != ANN_KEYS:
        return f"keys {list(keys)} are neither {list(ANN_KEYS)} nor a stub {list(STUB_KEYS)}"
    forms = rec["forms"]
    if type(forms) is not list or not forms:
        return "forms is not a non-empty list"
    n = len(forms)
    for name in ("lemmas", "upos", "feats", "space_after"):
        arr = rec[name]
        if type(arr) is not list or len(arr) != n:
            return f"{name} is not a list parallel to forms ({n} tokens)"
    if not set(map(type, forms)) <= _STR:
        return "forms holds a non-string"
    for name in ("lemmas", "upos", "feats"):
        if not set(map(type, rec[name])) <= _STR_OR_NULL:
            return f"{name} holds a value that is neither a string nor null"
    if not set(map(type, rec["space_after"])) <= _BOOL:
        return "space_after holds a non-boolean"
    sents = rec["sentences"]
    if type(sents) is not list:
        return "sentences is not a list"
    for pair in sents:
        if (type(pair) is not list or len(pair) != 2 or type(pair[0]) is not int or type(pair[1]) is not int
                or not 0 <= pair[0] <= pair[1] < n):
            return f"sentence span {pair!r} is not an inclusive [start, end] within {n} tokens"
    return None


def _loads(line: bytes):
    try:
        return orjson.loads(line), None
    except orjson.JSONDecodeError as exc:
        return None, f"is not valid JSON ({exc})"


def inspect_published(spec: DatasetSpec) -> Findings:
    """Stream the published pair of `spec` once and collect what the checks report."""
    version = published_version(spec)
    if version is None:
        return Findings(published=False)
    try:
        text_fh = version.open_text()
    except READ_ERRORS:  # the folder resolved was removed by a publish meanwhile
        return Findings(published=False)
    manifest = version.manifest
    f = Findings(published=True, manifest=manifest, has_sidecar=version.sidecar is not None)
    if f.has_sidecar != manifest.has_sidecar:
        f.aligned.add(f"the manifest says has_sidecar={manifest.has_sidecar} but the sidecar file "
                      f"{'exists' if f.has_sidecar else 'is missing'}")
    side_fh = version.open_sidecar() if f.has_sidecar else None
    try:
        with text_fh:
            _stream_pair(f, spec, text_fh, iter(side_fh) if side_fh is not None else None)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:  # truncated or corrupt gzip
        f.aligned.add(f"the sidecar cannot be read to the end: {exc}")
    finally:
        if side_fh is not None:
            side_fh.close()
    if manifest.docs != f.text_lines:
        f.aligned.add(f"the manifest records {manifest.docs} documents but the text has {f.text_lines} lines")
    return f


def _stream_pair(f: Findings, spec: DatasetSpec, text_fh: Iterable[bytes], side_iter: Iterator[bytes] | None) -> None:
    """One pass over the text lines and, beside them, the sidecar lines; `f.text_lines` is set only
    when the pass reaches the end."""
    key = spec.key
    joined = joins_with_newlines(spec.extractor)
    n = 0
    for n, line in enumerate(text_fh, 1):
        if not line.endswith(b"\n"):
            f.schema.add(f"text line {n} does not end with a newline")
        rec, err = _loads(line)
        if err is None:
            err = _text_problem(rec, spec)
        if err is not None:
            f.schema.add(f"{key}.jsonl line {n}: {err}")
            rec = None
        if side_iter is None:
            continue
        side_line = next(side_iter, None)
        if side_line is None:
            f.aligned.add(f"the sidecar ends after {n - 1} lines but the text has more")
            side_iter = None
            continue
        f.sidecar_lines += 1
        ann, err = _loads(side_line)
        if err is None:
            err = _ann_problem(ann)
        if err is not None:
            f.schema.add(f"{key}.annotations line {n}: {err}")
            continue
        if rec is not None and (ann["uid"] != rec["uid"] or ann["doc_id"] != rec["doc_id"]):
            f.aligned.add(f"line {n}: sidecar uid {ann['uid']!r} != text uid {rec['uid']!r}")
        elif rec is not None and "forms" in ann:
            f.sentences.add(rec["doc_id"], rec["text"], ann["forms"], ann["space_after"], ann["sentences"], joined)
    f.text_lines = n
    if side_iter is not None:
        extra = sum(1 for _ in side_iter)
        if extra:
            f.sidecar_lines += extra
            f.aligned.add(f"the sidecar has {extra} line(s) more than the text ({n})")


def _examples_md(title: str, examples: list, count: int) -> str:
    more = f"\n\n…and {count - len(examples)} more" if count > len(examples) else ""
    return f"{title}:\n\n" + "\n".join(f"- {e}" for e in examples) + more


def check_results(spec: DatasetSpec, f: Findings) -> list[AssetCheckResult]:
    asset_key = extracted_key(spec.key)
    m = f.manifest
    if not f.published or m is None:
        why = f"{spec.key} has no published output yet; materialize extracted/{spec.key}"
        return [AssetCheckResult(asset_key=asset_key, check_name=name, passed=False, severity=sev, description=why)
                for name, sev in ((ALIGNED, AssetCheckSeverity.ERROR), (SCHEMA, AssetCheckSeverity.ERROR),
                                  (UNIQUE, AssetCheckSeverity.WARN), (DROPS, AssetCheckSeverity.WARN),
                                  (SENTENCES, AssetCheckSeverity.WARN))]
    results = []
    a = f.aligned
    results.append(AssetCheckResult(
        asset_key=asset_key, check_name=ALIGNED, passed=a.count == 0, severity=AssetCheckSeverity.ERROR,
        description=(f"{f.text_lines} text lines, " + (f"{f.sidecar_lines} sidecar lines, same uid on every line"
                                                       if f.has_sidecar else "no sidecar (no annotated document)")
                     if a.count == 0 else _examples_md(f"{a.count} alignment problem(s)", a.examples, a.count)),
        metadata={"text_lines": f.text_lines, "sidecar_lines": f.sidecar_lines, "has_sidecar": f.has_sidecar,
                  "problems": a.count},
    ))
    s = f.schema
    results.append(AssetCheckResult(
        asset_key=asset_key, check_name=SCHEMA, passed=s.count == 0, severity=AssetCheckSeverity.ERROR,
        description=("every line is valid JSON with the published keys in order" if s.count == 0
                     else _examples_md(f"{s.count} invalid line(s)", s.examples, s.count)),
        metadata={"invalid_lines": s.count},
    ))
    dups = m.duplicate_uids
    examples = list(m.duplicate_examples)
    results.append(AssetCheckResult(
        asset_key=asset_key, check_name=UNIQUE, passed=dups == 0, severity=AssetCheckSeverity.WARN,
        description=("all uids are unique" if dups == 0 else
                     f"{dups} document(s) repeat a uid already used (ids are kept as the source gives them); "
                     f"e.g. {', '.join(repr(u) for u in examples)}"),
        metadata={"duplicate_uids": dups, "examples": MetadataValue.json(examples)},
    ))
    drops = m.drops
    total = sum(drops.values())
    results.append(AssetCheckResult(
        asset_key=asset_key, check_name=DROPS, passed=total == 0, severity=AssetCheckSeverity.WARN,
        description=("nothing was skipped" if total == 0 else
                     f"{total} item(s) skipped: " + ", ".join(f"{k}: {v}" for k, v in sorted(drops.items()))
                     + "; the warnings naming file and line are in the materialization's logs and metadata"),
        metadata={"skipped_items": total, "drop_ledger": MetadataValue.json(drops)},
    ))
    results.append(sentences_result(spec, f.sentences))
    return results


def sentences_result(spec: DatasetSpec, s: SentenceFindings) -> AssetCheckResult:
    rule = ("joined by newlines" if joins_with_newlines(spec.extractor)  # formats.md: ADDENDUM 5.2, 6.2
            else "in order, whitespace between")  # ADDENDUM 4.2
    if not s.documents:
        description = "no annotated documents: nothing to compare"
    elif not s.mismatched_documents:
        description = (f"all {s.sentences} sentences of {s.documents} annotated documents rebuilt from their "
                       f"tokens equal the text, {rule}")
    else:
        description = _examples_md(
            f"{s.mismatched_sentences} of {s.sentences} sentences ({s.sentence_rate:.2%}) in "
            f"{s.mismatched_documents} of {s.documents} annotated documents differ from the text rebuilt from "
            f"their tokens ({rule})", s.examples, s.mismatched_documents)
        if spec.extractor == "conllu":
            description += ("\n\nconllu skips multiword-token rows (IDs like `3-4`), so a sentence "
                            "holding one rebuilds to its syntactic words, not to its `# text`.")
    return AssetCheckResult(
        asset_key=extracted_key(spec.key), check_name=SENTENCES, passed=s.mismatched_documents == 0,
        severity=AssetCheckSeverity.WARN, description=description,
        metadata={"annotated_documents": s.documents, "sentences": s.sentences,
                  "mismatched_documents": s.mismatched_documents, "mismatched_sentences": s.mismatched_sentences,
                  "mismatch_rate": MetadataValue.float(round(s.sentence_rate, 6)),
                  "document_mismatch_rate": MetadataValue.float(round(s.document_rate, 6)),
                  "examples": MetadataValue.json(s.examples)},
    )


def with_its_asset() -> AutomationCondition:
    """Checks join every run the automation sensor requests for their asset (it would leave them out)."""
    return AutomationCondition.any_deps_match(AutomationCondition.will_be_requested())


def build_extracted_checks(spec: DatasetSpec) -> AssetChecksDefinition:
    asset_key = extracted_key(spec.key)
    auto = with_its_asset()
    # One word each, the one thing a check's name does not say: whether a failure blocks. `dg list defs`
    # gives the description a column of about 8 characters in an 80-column terminal, so a longer text
    # wraps a word per line; the name says what is checked, the module docstring and the README say how.
    # In name order, which is how `dg list defs` sorts them too.
    specs = [
        AssetCheckSpec(DROPS, asset=asset_key, automation_condition=auto, description=WARNING),
        AssetCheckSpec(SENTENCES, asset=asset_key, automation_condition=auto, description=WARNING),
        AssetCheckSpec(ALIGNED, asset=asset_key, blocking=True, automation_condition=auto, description=BLOCKING),
        AssetCheckSpec(UNIQUE, asset=asset_key, automation_condition=auto, description=WARNING),
        AssetCheckSpec(SCHEMA, asset=asset_key, blocking=True, automation_condition=auto, description=BLOCKING),
    ]

    @multi_asset_check(specs=specs, name=f"{spec.key}_published_checks", can_subset=True,
                       description=f"Checks on the published files of {spec.key}, read once.")
    def _checks(context: AssetCheckExecutionContext):
        # can_subset: the UI's Checks tab runs one check alone; the pair is still streamed once
        selected = {k.name for k in context.selected_asset_check_keys}
        for result in check_results(spec, inspect_published(spec)):
            if result.check_name in selected:
                yield result

    return _checks
