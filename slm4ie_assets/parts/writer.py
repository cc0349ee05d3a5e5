"""One shard -> one part: text lines, sidecar part and uid hashes, committed by a typed PartMeta.

The part's files are written under `.partial` names as documents arrive (text on a helper thread,
see gzipio), fsynced, renamed, and committed by the meta file, written last. An error on the output
side (disk full, quota) leaves no half-written file and names the dataset (OutputWriteError).

A count-only pass over a range of a split file (`count_range`, docs/splitting.md) runs the same
accounting (`PartAccounts`) with its output going nowhere, so the two cannot disagree.
"""

import os
import time
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from xxhash import xxh3_64_intdigest

from ..catalog import FORMAT_VERSION, DatasetSpec
from ..extractors.base import Extractor
from ..extractors.drop_ledger import DropLedger
from ..extractors.extract_context import (
    AT_FILE_START,
    COUNTING,
    ExtractContext,
    NeedsBefore,
    RangeCounts,
    RangeStart,
)
from ..extractors.input_file import InputFile, is_input_error
from ..planning.input_stamps import (
    InputChanged,
    changed_entry,
    describe_change,
    only_metadata_may_differ,
    stamp_of,
)
from ..planning.shards import Shard
from ..schema import Document
from ..store.dataset_store import DatasetStore, OutputWriteError, PartPaths, partial, write_atomic
from ..store.length_stats import LengthCounter, LengthStats
from ..store.part_meta import PartMeta
from ..utils.gzipio import LEVEL, RANGE_PART_LEVEL, ChunkWriter, fsync_file, start_writeback
from .document_encoder import Drop, encode_document
from .sidecar_writer import SidecarWriter

Progress = Callable[[int, int, int], None]  # (documents, text bytes, input files finished) so far in this part
_UID_FLUSH = 1 << 16
RECHECK = ".recheck"  # a second attempt's files (`recheck_whole_files`), removed with it
_PROGRESS_EVERY = 1000  # documents between hook calls; the hook also runs after each file


class _BytesSink(Protocol):
    def write(self, data: bytes, /) -> object: ...


class _Nowhere:
    """The sink of a count-only pass: text lines, sidecar lines and uid hashes are dropped."""

    writer = None  # as SidecarWriter's before its first annotated document

    def write(self, *_args: object) -> None:
        return None


_NOWHERE = _Nowhere()


class PartAccounts:
    """What a part records of the documents it is given: documents, fallback ids, drops, repairs,
    lengths; a range of a split file continues its file from where it `start`s (docs/splitting.md).
    Its output goes nowhere: `PartWriter` gives it files, and a count-only pass (`COUNTING`) keeps
    no warning."""

    def __init__(self, spec: DatasetSpec, start: RangeStart = COUNTING, progress: Progress | None = None):
        # a range of a split file continues its file: fallback ids, line numbers, the file's first
        # 100 warnings of each kind (DropLedger.start_file, at each file); a speculative one numbers
        # from zero, and whatever would depend on the real counts before it raises NeedsBefore
        self.ledger = DropLedger()
        self.speculative = start.speculative
        self.context = ExtractContext(spec.key, spec.raw_dir, self.ledger, on_warning=None, start=start,
                                      max_document_bytes=spec.max_document_bytes)
        self.repaired_docs = 0
        self._spec, self._progress = spec, progress
        self._source, self._domain = spec.key, spec.domain
        self.docs = self.annotated = self.tokens = self.sentences = self.text_bytes = 0
        self.repairs: dict[str, int] = {}
        self._uids = array("Q")
        self._char_lengths, self._token_lengths = LengthCounter(), LengthCounter()
        self.file_docs = 0  # documents written from the current file
        self.files_done = 0  # input files finished, for the progress hook
        self._started = time.monotonic()
        self._write_text: Callable[[bytes], object] = _NOWHERE.write
        self._sidecar: SidecarWriter | _Nowhere = _NOWHERE
        self._uid_sink: _BytesSink = _NOWHERE

    def add_documents(self, file: InputFile, documents: Iterable[Document]) -> None:
        """Write the documents of one input file in order; a dropped one is counted by reason (D6).

        Every document of every dataset passes through this loop, so what it touches per document
        is held in locals and stored back when the file ends, or when the extractor raises (the
        documents written before the error stay in the part)."""
        encode, source, domain, prefix = encode_document, self._source, self._domain, file.rel_stem
        max_bytes = self._spec.max_document_bytes
        if self.speculative:
            documents = _own_ids_only(documents)
        write_text, sidecar, uids, progress = self._write_text, self._sidecar, self._uids, self._progress
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
                        uids.tofile(self._uid_sink)
                        del uids[:]
                except OSError as exc:
                    raise self._output_error(exc) from exc
                if ann_line is not None and (ann := doc.annotations) is not None:
                    annotated += 1
                    tokens += len(ann.forms)
                    sentences += len(ann.sentences)
                    token_lengths.add(len(ann.forms))
                n = len(doc.text)  # length_stats.length_bucket, inlined
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
        if self.speculative:  # its warning may or may not be among the file's first 100
            raise NeedsBefore("repair")
        for issue in repairs:
            self.repairs[issue] = self.repairs.get(issue, 0) + 1
        self.repaired_docs += 1
        if self.ledger.repair_limit > 0:
            self.ledger.add_repair(f"{self._source}/{file.rel}: document {doc_id!r}: "
                                   f"{', '.join(sorted(set(repairs)))} repaired (U+FFFD / null)")

    def _output_error(self, exc: OSError) -> Exception:
        return exc  # nowhere to write: never reached

    def extract_file(self, extractor: Extractor, file: InputFile) -> None:
        """The documents of one input file; an input that cannot be read (permissions, I/O error)
        costs that file only (D6)."""
        self.context.lines_read = None  # set again only by a reader that reads this file to its end
        before = self.context.before  # FILE_START but for a range, whose shard is that one file
        self.ledger.start_file(before.drops, before.repaired_docs, keep=not self.context.counting)
        try:
            self.add_documents(file, extractor.extract(file, self.context))
        except OSError as exc:
            if isinstance(exc, OutputWriteError) or not is_input_error(exc, file):
                raise
            self.context.drop("unreadable_file", file, f"read failed ({exc.strerror or exc}); kept the "
                              f"{self.file_docs} document(s) read before it, skipped the rest of the file")

    def range_counts(self, extractor: Extractor, file: InputFile) -> RangeCounts:
        """What `file` adds to the counts its file's later ranges continue from (no lines for a whole
        file or a last range: no range follows them)."""
        lines = 0
        splitter = extractor.splitter
        if splitter is not None and file.range is not None and not file.range.is_last:
            try:  # counted while reading (text), or one more pass over the range
                lines = self.context.lines_read if self.context.lines_read is not None else splitter.lines(file)
            except OSError:
                pass  # unreadable: already counted as `unreadable_file`; no later warning names its lines
        return RangeCounts(self.docs, lines, self.ledger.total, self.repaired_docs, self.context.carry)


def _own_ids_only(documents: Iterable[Document]) -> Iterator[Document]:
    """The documents of a speculative extraction, up to the first one the encoder would give a
    fallback id, numbered from the documents before it in the file (ADDENDUM 4.1)."""
    for doc in documents:
        doc_id = doc.doc_id
        if not doc_id or doc_id.isspace():
            raise NeedsBefore("fallback id")
        yield doc


class PartWriter(PartAccounts):
    """The part of `shard` being written: add the documents of each input file, then `commit`
    (which returns the meta) or `abort` (which removes every file of the attempt)."""

    def __init__(self, spec: DatasetSpec, shard: Shard, store: DatasetStore, progress: Progress | None = None,
                 start: RangeStart = AT_FILE_START, text_thread: bool = True, paths: PartPaths | None = None):
        store.parts.mkdir(parents=True, exist_ok=True)
        self.paths = store.part_paths(shard.key) if paths is None else paths  # other paths: a second attempt
        self._tmp_text, self._tmp_ann, self._tmp_uids = map(
            partial, (self.paths.text, self.paths.annotations, self.paths.uids))
        self.paths.meta.unlink(missing_ok=True)  # the part is uncommitted from here on
        super().__init__(spec, start, progress)
        self._shard, self._store = shard, store
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
        self._uid_sink = self._uid_file
        self._has_annotations: bool | None = None  # known once the outputs are closed
        # `text_thread`: the text is compressed on a helper thread (gzipio.ChunkWriter), worth it only
        # when the process has a core to spare beside its own; a pool that fills the machine turns it
        # off (worker_context.WorkerContext.text_writer_thread, docs/splitting.md "Fixed costs").
        # Same bytes either way.
        self._text = ChunkWriter(self._text_file, writeback=True, threaded=text_thread)
        self._write_text = self._text.write
        # a range's sidecar is only ever read back into its file's member at publish: compressed quickly
        level = RANGE_PART_LEVEL if shard.files[0].range is not None else LEVEL
        self._sidecar = self._sidecar_writer = SidecarWriter(self._tmp_ann, self._tmp_text, self._text.flush, level)

    def _output_error(self, exc: OSError) -> Exception:
        return OutputWriteError.of(self._spec, self._store.parts, exc)

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

    def _close_outputs(self) -> bool:
        """Everything written reaches the part's `.partial` files; whether it has annotations."""
        if self._has_annotations is None:
            self._uids.tofile(self._uid_file)
            del self._uids[:]
            self._text.close()
            self._has_annotations = self._sidecar_writer.close()
            self._text_file.flush()
            self._uid_file.flush()
        return self._has_annotations

    def _finish_files(self) -> bool:
        has_annotations = self._close_outputs()
        start_writeback(self._uid_file.fileno())  # on its way while the text's fsync waits
        fsync_file(self._text_file)
        fsync_file(self._uid_file)
        try:
            self._text_file.close()
        finally:
            self._uid_file.close()
        return has_annotations

    def same_output(self, other: "PartWriter") -> bool:
        """Whether `other`, a second attempt at the same part, wrote the same bytes and counted the
        same documents, drops, warnings and lengths (`recheck_whole_files`)."""
        mine, theirs = self._close_outputs(), other._close_outputs()
        if mine != theirs or replace(self._meta(mine), seconds=0) != replace(other._meta(theirs), seconds=0):
            return False
        pairs = [(self._tmp_text, other._tmp_text), (self._tmp_uids, other._tmp_uids)]
        return all(_same_bytes(a, b) for a, b in pairs + ([(self._tmp_ann, other._tmp_ann)] if mine else []))

    def _meta(self, has_annotations: bool) -> PartMeta:
        shard = self._shard
        return PartMeta(
            format=FORMAT_VERSION, shard=shard.key, files=tuple(f.rel for f in shard.files),
            fingerprint=shard.fingerprint, recipe=self._spec.recipe, docs=self.docs, annotated_docs=self.annotated,
            tokens=self.tokens, sentences=self.sentences, text_bytes=self.text_bytes, input_bytes=shard.size,
            has_annotations=has_annotations, drops=dict(self.ledger.counts),
            warnings=tuple(self.ledger.warnings),
            repairs=self.repairs, seconds=round(time.monotonic() - self._started, 3),
            lengths=LengthStats(self._char_lengths.histogram(), self._token_lengths.histogram()),
        )

    def abort(self) -> None:
        """Stop the helper threads and remove the attempt's files (safe after a failed commit)."""
        self._text.abort()
        self._sidecar_writer.abort()
        for fh in (self._text_file, self._uid_file):
            try:
                fh.close()
            except OSError:
                pass
        self._remove_partials()

    def _remove_partials(self) -> None:
        for p in (self._tmp_text, self._tmp_ann, self._tmp_uids):
            p.unlink(missing_ok=True)


def _same_bytes(a: Path, b: Path) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def inputs_changed(dataset: str, shard: Shard) -> tuple[InputChanged | None, bool]:
    """The InputChanged to raise, naming the first file whose stat differs from the plan's (a
    write, a rename over it, a removal), or None; and whether a second extraction may still show
    that only metadata changed: every changed input is a whole file (not a range of a split file,
    whose other ranges may have been read before the change) still at its planned size."""
    changed: InputChanged | None = None
    maybe_metadata = True
    for file, planned in zip(shard.files, shard.stamps, strict=False):
        now = stamp_of(file.path)
        inner = changed_entry(planned, now)
        if inner is None:
            continue
        changed = changed or InputChanged(describe_change(dataset, file.rel, inner), file.rel)
        maybe_metadata = maybe_metadata and file.range is None and only_metadata_may_differ(planned, now)
    return changed, maybe_metadata


def recheck_whole_files(spec: DatasetSpec, extractor: Extractor, shard: Shard, store: DatasetStore,
                        written: PartWriter) -> bool:
    """An input's stamp moved but not its size (a `touch`, a `chmod`, a hard link: issue 34, case 6;
    or a rewrite in place): the shard is extracted once more beside the first attempt (`.recheck`
    files), and the part may commit if its inputs hold still meanwhile and the two attempts wrote
    the same bytes: then the part is what the files hold now. The first read costs nothing extra;
    only this rare case reads the files again (planning/input_stamps.py)."""
    before = [stamp_of(f.path) for f in shard.files]
    paths = PartPaths(*(p.with_name(p.name + RECHECK) for p in written.paths))
    again = PartWriter(spec, shard, store, None, AT_FILE_START, False, paths)
    try:
        for file in shard.files:
            again.extract_file(extractor, file)
        return [stamp_of(f.path) for f in shard.files] == before and written.same_output(again)
    finally:
        again.abort()


def write_part_counted(spec: DatasetSpec, extractor: Extractor, shard: Shard, store: DatasetStore,
                       progress: Progress | None = None, start: RangeStart = AT_FILE_START,
                       text_thread: bool = True) -> tuple[PartMeta, RangeCounts]:
    """Extract one shard into its part files and commit them with the meta file; returns the meta
    and what the part adds to its file's counts (for the ranges after it). A range of a split file
    continues where its `start` says; a speculative one (docs/splitting.md) raises NeedsBefore,
    with every file of the attempt removed, when the part would depend on the ranges before it.
    An input whose stat changed since the plan fails the run with InputChanged, unless only its
    metadata changed (`recheck_whole_files`). `text_thread`: see `PartWriter`."""
    writer = PartWriter(spec, shard, store, progress, start, text_thread)
    try:
        for file in shard.files:
            writer.extract_file(extractor, file)
            writer.files_done += 1
            if progress is not None:
                progress(writer.docs, writer.text_bytes, writer.files_done)
        changed, maybe_metadata = inputs_changed(spec.key, shard)
        if changed is not None and not (maybe_metadata and recheck_whole_files(spec, extractor, shard, store, writer)):
            raise changed
        meta = writer.commit()
    except BaseException:
        writer.abort()
        raise
    return meta, writer.range_counts(extractor, shard.files[0])


def count_range(spec: DatasetSpec, extractor: Extractor, file: InputFile) -> RangeCounts:
    """The counts of one range of a split file without writing it: the splitter's quick count where
    it has one (not under a cap on document size, which may drop a document), else the part
    writer's own accounting of the range's documents, sent nowhere."""
    splitter = extractor.splitter
    quick = None if spec.max_document_bytes or splitter is None else splitter.quick_count(file)
    if quick is not None:
        return RangeCounts(docs=quick[0], lines=quick[1])
    accounts = PartAccounts(spec, COUNTING)
    accounts.extract_file(extractor, file)
    return accounts.range_counts(extractor, file)
