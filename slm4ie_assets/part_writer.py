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
from .extractors.base import DropLedger, ExtractContext, Extractor, InputFile
from .gzipio import ChunkWriter, fsync_file
from .part_meta import PartMeta
from .schema import Document
from .shards import Shard
from .sidecar_writer import SidecarWriter
from .store import DatasetStore, OutputWriteError, partial, write_atomic

Progress = Callable[[int, int], None]  # (documents, text bytes) written so far in this part
MAX_WARNINGS = 100  # kept verbatim in the meta; the drop counts are always complete
_UID_FLUSH = 1 << 16
_PROGRESS_EVERY = 5000


class PartWriter:
    """The part of `shard` being written: add the documents of each input file, then `commit`
    (which returns the meta) or `abort` (which removes every file of the attempt)."""

    def __init__(self, spec: DatasetSpec, shard: Shard, store: DatasetStore, progress: Progress | None = None):
        store.parts.mkdir(parents=True, exist_ok=True)
        self.paths = store.part_paths(shard.key)
        self._tmp_text, self._tmp_ann, self._tmp_uids = map(
            partial, (self.paths.text, self.paths.annotations, self.paths.uids))
        self.paths.meta.unlink(missing_ok=True)  # the part is uncommitted from here on
        self.ledger = DropLedger()
        self.context = ExtractContext(spec.key, spec.raw_dir, self.ledger, on_warning=None)
        self._spec, self._shard, self._store, self._progress = spec, shard, store, progress
        self._source, self._domain = spec.key, spec.domain
        self.docs = self.annotated = self.tokens = self.sentences = self.text_bytes = 0
        self.repairs: dict[str, int] = {}
        self._repair_warnings: list[str] = []
        self._uids = array("Q")
        self.file_docs = 0  # documents written from the current file
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
        write_text, sidecar, uids, progress = self._text.write, self._sidecar, self._uids, self._progress
        docs, text_bytes, emitted, xxh3 = self.docs, self.text_bytes, 0, xxh3_64_intdigest
        annotated, tokens, sentences = self.annotated, self.tokens, self.sentences
        try:
            for doc in documents:
                encoded = encode(doc, source, domain, prefix, emitted)
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
                text_bytes += len(line)
                docs += 1
                emitted += 1
                if progress is not None and docs % _PROGRESS_EVERY == 0:
                    progress(docs, text_bytes)
        finally:
            self.docs, self.text_bytes, self.file_docs = docs, text_bytes, emitted
            self.annotated, self.tokens, self.sentences = annotated, tokens, sentences

    def _count_repairs(self, file: InputFile, doc_id: str, repairs: tuple[str, ...]) -> None:
        for issue in repairs:
            self.repairs[issue] = self.repairs.get(issue, 0) + 1
        if len(self._repair_warnings) < MAX_WARNINGS:
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


def _is_input_error(exc: OSError, file: InputFile) -> bool:
    """True when an extractor's OSError is about reading its own input (the file, or a file inside
    a config directory), not about something else it needs (a TSV sidecar fails the dataset)."""
    if exc.filename is None:
        return True
    name = os.fsdecode(exc.filename)
    base = os.fspath(file.path)
    return name == base or name.startswith(base + os.sep)


def _extract_file(writer: PartWriter, extractor: Extractor, file: InputFile) -> None:
    try:
        writer.add_documents(file, extractor.extract(file, writer.context))
    except OSError as exc:
        if isinstance(exc, OutputWriteError) or not _is_input_error(exc, file):
            raise
        # D6: an input that cannot be read (permissions, I/O error) costs that file only
        writer.context.drop("unreadable_file", file, f"read failed ({exc.strerror or exc}); kept the "
                            f"{writer.file_docs} document(s) read before it, skipped the rest of the file")


def write_part(spec: DatasetSpec, extractor: Extractor, shard: Shard, store: DatasetStore,
               progress: Progress | None = None) -> PartMeta:
    """Extract one shard into its part files and commit them with the meta file."""
    writer = PartWriter(spec, shard, store, progress)
    try:
        for file in shard.files:
            _extract_file(writer, extractor, file)
        return writer.commit()
    except BaseException:
        writer.abort()
        raise
