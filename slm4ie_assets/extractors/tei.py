"""tei: `*.xml` in the TEI namespace, three structures, one streaming parser (extraction-formats:
tei; ADDENDUM 6 as amended by D3, D4, D6, D12, D13, D19, D21 and S3, S6-S9).

Per file (S7): tei_scan decides the structure, then one streaming lxml pass with start/end
events (tei_pass) extracts it: tei_annotated (per-file and utterance documents) or tei_plain
(paragraphs, and D19 plain utterances). There is no size threshold: a 1 KB and a 10 GB file take
the same code (D12), and memory is bounded by the largest document, not by the file.

Errors (D6, S3): a parse error or bytes invalid for the declared encoding keep the documents
closed before it, drop the one in progress (a per-file document whole) and skip the rest of the
file, with one drop naming the file and line. An unreadable file is skipped and counted.

Parser limits: libxml2's defaults (text nodes up to 10 MB, nesting up to 256) apply first. A file
that hits one is parsed again with huge_tree (text nodes up to 1 GB, nesting up to 2048), resuming
after the documents and drops already delivered, so the output does not depend on the retry.
Entity amplification (billion laughs) is refused either way, and no entity is ever expanded, so
an external entity (XXE) is never read.
"""

from typing import Iterator

from lxml import etree

from ..schema import Document
from .base import ExtractContext, InputFile
from .tei_annotated import AnnotatedPass
from .tei_plain import PlainPass, PlainUtterancePass
from .tei_errors import first_error, is_resource_limit, reason_for
from .tei_scan import ANNOTATED, PLAIN_UTTERANCES, detect_structure
from .tsv_metadata import TsvSidecarExtractor

PASSES = {ANNOTATED: AnnotatedPass, PLAIN_UTTERANCES: PlainUtterancePass}


class _DropGate:
    """Forwards a pass's drops to the ledger, except the first `replayed` ones: on a huge_tree
    retry the pass meets again the drops it already reported."""

    def __init__(self, ctx: ExtractContext, file: InputFile, replayed: int):
        self.ctx, self.file, self.replayed = ctx, file, replayed
        self.seen = 0

    def __call__(self, reason: str, message: str, line=None) -> None:
        self.seen += 1
        if self.seen > self.replayed:
            self.ctx.drop(reason, self.file, message, line)


class TeiExtractor(TsvSidecarExtractor):
    name = "tei"
    patterns = (".xml",)

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        row = self.tsv_row(file, ctx)
        try:
            structure = detect_structure(file.path)
        except OSError as exc:
            ctx.drop("unreadable_file", file, f"cannot read ({exc.strerror or exc}); file skipped")
            return
        yield from self._extract(PASSES.get(structure, PlainPass), file, ctx, row)

    def _extract(self, pass_class, file: InputFile, ctx: ExtractContext, row: dict) -> Iterator[Document]:
        delivered = 0  # documents already yielded (skipped on a retry)
        dropped = 0  # drops already reported (not repeated on a retry)
        huge = False
        while True:
            gate = _DropGate(ctx, file, dropped)
            extraction = pass_class(row, gate, file.stem)
            produced = 0
            try:
                with open(file.path, "rb") as fh:
                    for doc in extraction.run(fh, huge):
                        produced += 1
                        if produced > delivered:
                            delivered = produced
                            yield doc
                return
            except etree.ParseError as exc:
                line, code, message = first_error(extraction.parser, exc)
                if not huge and is_resource_limit(code, message):
                    huge, dropped = True, gate.seen
                    continue
                reason = reason_for(code)
                lost = extraction.in_progress()
                ctx.drop(reason, file, f"{message}; kept the {delivered} document(s) closed before it"
                                       f"{'; ' + lost if lost else ''}; skipped the rest of the file", line)
                return
            except OSError as exc:
                ctx.drop("unreadable_file", file, f"read failed ({exc.strerror or exc}); kept the {delivered} "
                                                  "document(s) read before it, skipped the rest of the file")
                return
