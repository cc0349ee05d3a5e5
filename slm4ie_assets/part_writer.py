"""One shard -> one part: text lines, sidecar part and uid hashes, committed by a typed PartMeta.

The part's files are written under `.partial` names as documents arrive (text on a helper thread,
see gzipio), fsynced, renamed, and committed by the meta file, written last. An error on the output
side (disk full, quota) leaves no half-written file and names the dataset (OutputWriteError).
"""

import os
import time
from array import array
from collections.abc import Callable, Iterable

from xxhash import xxh3_64_intdigest

from .catalog import FORMAT_VERSION, DatasetSpec
from .document_encoder import Drop, encode_document
from .extractors.base import FILE_START, DropLedger, ExtractContext, Extractor, InputFile, RangeCounts, is_input_error
from .gzipio import ChunkWriter, fsync_file
from .input_stamps import InputChanged, changed_entry, describe_change, stamp_of
from .length_stats import LengthCounter, LengthStats
from .part_meta import PartMeta
from .schema import Document
from .shards import Shard
from .sidecar_writer import SidecarWriter
from .split import range_lines
from .store import DatasetStore, OutputWriteError, partial, write_atomic

Progress = Callable[[int, int, int], None]  # (documents, text bytes, input files finished) so far in this part
MAX_WARNINGS = 100  # kept verbatim in the meta; the drop counts are always complete
_UID_FLUSH = 1 << 16
_PROGRESS_EVERY = 1000  # documents between hook calls; the hook also runs after each file


class PartWriter:
    """The part of `shard` being written: add the documents of each input file, then `commit`
    (which returns the meta) or `abort` (which removes every file of the attempt)."""

    def __init__(self, spec: DatasetSpec, shard: Shard, store: DatasetStore, progress: Progress | None = None,
                 before: RangeCounts = FILE_START):
        store.parts.mkdir(parents=True, exist_ok=True)
        self.paths = store.part_paths(shard.key)
        self._tmp_text, self._tmp_ann, self._tmp_uids = map(
            partial, (self.paths.text, self.paths.annotations, self.paths.uids))
        self.paths.meta.unlink(missing_ok=True)  # the part is uncommitted from here on
        # a range of a split file continues its file: fallback ids, line numbers, the first 100
        # warnings (docs/splitting.md)
        self.ledger = DropLedger(limit=max(0, MAX_WARNINGS - before.drops))
        self.context = ExtractContext(spec.key, spec.raw_dir, self.ledger, on_warning=None, before=before,
                                      max_document_bytes=spec.max_document_bytes)
        self._repair_room = max(0, MAX_WARNINGS - before.repaired_docs)
        self.repaired_docs = 0
        self._spec, self._shard, self._store, self._progress = spec, shard, store, progress
        self._source, self._domain = spec.key, spec.domain
        self.docs = self.annotated = self.tokens = self.sentences = self.text_bytes = 0
        self.repairs: dict[str, int] = {}
        self._repair_warnings: list[str] = []
        self._uids = array("Q")
        self._char_lengths, self._token_lengths = LengthCounter(), LengthCounter()
        self.file_docs = 0  # documents written from the current file
        self.files_done = 0  # input files finished, for the progress hook
        self._started = time.monotonic()
        try:
            self._text_file = open(self._tmp_text, "wb")
            try:
                self._uid_file = open(self._tmp_uids, "wb")
            except BaseException:
                self._text_file.close()
                raise
        except OSError as exc:
            self._remove_partials()
            raise OutputWriteError.of(spec, store.parts, exc) from exc
        self._text = ChunkWriter(self._text_file, writeback=True)
        self._sidecar = SidecarWriter(self._tmp_ann, self._tmp_text, self._text.flush)

    def add_documents(self, file: InputFile, documents: Iterable[Document]) -> None:
        """Write the documents of one input file in order; a dropped one is counted by reason (D6).

        Every document of every dataset passes through this loop, so what it touches per document
        is held in locals and stored back when the file ends, or when the extractor raises (the
        documents written before the error stay in the part)."""
        encode, source, domain, prefix = encode_document, self._source, self._domain, file.rel_stem
        max_bytes = self._spec.max_document_bytes
        write_text, sidecar, uids, progress = self._text.write, self._sidecar, self._uids, self._progress
        docs, text_bytes, emitted, xxh3 = self.docs, self.text_bytes, self.context.before.docs, xxh3_64_intdigest
        annotated, tokens, sentences = self.annotated, self.tokens, self.sentences
        char_counts, token_lengths = self._char_lengths.counts, self._token_lengths
        chars_min, chars_max = self._char_lengths.min, self._char_lengths.max
        try:
            for doc in documents:
                encoded = encode(doc, source, domain, prefix, emitted, max_bytes)
                if type(encoded) is Drop:  # Drop is final; cheaper than isinstance on every document
                    self.context.drop(encoded.reason, file, encoded.message)
                    continue
                doc_id, uid, line, ann_line, repairs = encoded
                if repairs:
                    self._count_repairs(file, doc_id, repairs)
                try:
                    write_text(line)
                    if ann_line is not None or sidecar.writer is not None:
                        sidecar.write(ann_line, doc_id, uid, docs)
                    uids.append(xxh3(uid.encode("utf-8", "surrogatepass")))  # duplicates.uid_hash, inlined
                    if len(uids) >= _UID_FLUSH:
                        uids.tofile(self._uid_file)
                        del uids[:]
                except OSError as exc:
                    raise OutputWriteError.of(self._spec, self._store.parts, exc) from exc
                if ann_line is not None and (ann := doc.annotations) is not None:
                    annotated += 1
                    tokens += len(ann.forms)
                    sentences += len(ann.sentences)
                    token_lengths.add(len(ann.forms))
                n = len(doc.text)  # length_stats.bucket_of, inlined
                char_counts[n if n < 256 else ((b := n.bit_length() - 8) << 8) | (n >> b)] += 1
                if n > chars_max:
                    chars_max = n
                if n < chars_min:
                    chars_min = n
                text_bytes += len(line)
                docs += 1
                emitted += 1
                if progress is not None and docs % _PROGRESS_EVERY == 0:
                    progress(docs, text_bytes, self.files_done)
        finally:
            self.docs, self.text_bytes, self.file_docs = docs, text_bytes, emitted
            self.annotated, self.tokens, self.sentences = annotated, tokens, sentences
            self._char_lengths.min, self._char_lengths.max = chars_min, chars_max

    def _count_repairs(self, file: InputFile, doc_id: str, repairs: tuple[str, ...]) -> None:
        for issue in repairs:
            self.repairs[issue] = self.repairs.get(issue, 0) + 1
        self.repaired_docs += 1
        if len(self._repair_warnings) < self._repair_room:
            self._repair_warnings.append(f"{self._source}/{file.rel}: document {doc_id!r}: "
                                         f"{', '.join(sorted(set(repairs)))} repaired (U+FFFD / null)")

    def commit(self) -> PartMeta:
        """Make the files durable, move them into place and write the meta that commits them."""
        try:
            has_annotations = self._finish_files()
            os.replace(self._tmp_text, self.paths.text)
            os.replace(self._tmp_uids, self.paths.uids)
            if has_annotations:
                os.replace(self._tmp_ann, self.paths.annotations)
            else:
                self.paths.annotations.unlink(missing_ok=True)
            meta = self._meta(has_annotations)
            write_atomic(self.paths.meta, meta.to_json())
        except OSError as exc:
            partial(self.paths.meta).unlink(missing_ok=True)
            raise OutputWriteError.of(self._spec, self._store.parts, exc) from exc
        return meta

    def _finish_files(self) -> bool:
        self._uids.tofile(self._uid_file)
        self._text.close()
        has_annotations = self._sidecar.close()
        fsync_file(self._text_file)
        fsync_file(self._uid_file)
        try:
            self._text_file.close()
        finally:
            self._uid_file.close()
        return has_annotations

    def _meta(self, has_annotations: bool) -> PartMeta:
        shard = self._shard
        return PartMeta(
            format=FORMAT_VERSION, shard=shard.key, files=tuple(f.rel for f in shard.files),
            fingerprint=shard.fingerprint, recipe=self._spec.recipe, docs=self.docs, annotated_docs=self.annotated,
            tokens=self.tokens, sentences=self.sentences, text_bytes=self.text_bytes, input_bytes=shard.size,
            has_annotations=has_annotations, drops=dict(self.ledger.counts),
            warnings=tuple((self.ledger.warnings + self._repair_warnings)[:MAX_WARNINGS]),
            repairs=self.repairs, seconds=round(time.monotonic() - self._started, 3),
            lengths=LengthStats(self._char_lengths.histogram(), self._token_lengths.histogram()),
        )

    def abort(self) -> None:
        """Stop the helper threads and remove the attempt's files (safe after a failed commit)."""
        self._text.abort()
        self._sidecar.abort()
        for fh in (self._text_file, self._uid_file):
            try:
                fh.close()
            except OSError:
                pass
        self._remove_partials()

    def _remove_partials(self) -> None:
        for p in (self._tmp_text, self._tmp_ann, self._tmp_uids):
            p.unlink(missing_ok=True)


def _extract_file(writer: PartWriter, extractor: Extractor, file: InputFile) -> None:
    try:
        writer.add_documents(file, extractor.extract(file, writer.context))
    except OSError as exc:
        if isinstance(exc, OutputWriteError) or not is_input_error(exc, file):
            raise
        # D6: an input that cannot be read (permissions, I/O error) costs that file only
        writer.context.drop("unreadable_file", file, f"read failed ({exc.strerror or exc}); kept the "
                            f"{writer.file_docs} document(s) read before it, skipped the rest of the file")


def check_inputs_unchanged(dataset: str, shard: Shard) -> None:
    """Raise InputChanged, naming the file, when an input's stat differs from the plan's (a write,
    a rename over it, a removal), so the part read from it is never committed."""
    for file, planned in zip(shard.files, shard.stamps, strict=False):
        inner = changed_entry(planned, stamp_of(file.path))
        if inner is not None:
            raise InputChanged(describe_change(dataset, file.rel, inner), file.rel)


def write_part(spec: DatasetSpec, extractor: Extractor, shard: Shard, store: DatasetStore,
               progress: Progress | None = None, before: RangeCounts = FILE_START) -> PartMeta:
    """Extract one shard into its part files and commit them with the meta file; a range of a
    split file continues where `before` (the earlier ranges' counts) says."""
    return write_part_counted(spec, extractor, shard, store, progress, before)[0]


def write_part_counted(spec: DatasetSpec, extractor: Extractor, shard: Shard, store: DatasetStore,
                       progress: Progress | None = None,
                       before: RangeCounts = FILE_START) -> tuple[PartMeta, RangeCounts]:
    """`write_part`, plus what the part adds to its file's counts (for the ranges after it)."""
    writer = PartWriter(spec, shard, store, progress, before)
    try:
        for file in shard.files:
            _extract_file(writer, extractor, file)
            writer.files_done += 1
            if progress is not None:
                progress(writer.docs, writer.text_bytes, writer.files_done)
        check_inputs_unchanged(spec.key, shard)
        meta = writer.commit()
    except BaseException:
        writer.abort()
        raise
    file = shard.files[0]
    lines = 0
    if file.range is not None and not file.range.is_last:
        try:
            lines = range_lines(extractor, file)
        except OSError:
            pass  # unreadable: already counted as `unreadable_file`; no later warning names its lines
    return meta, RangeCounts(writer.docs, lines, writer.ledger.total, writer.repaired_docs, writer.context.tally)
