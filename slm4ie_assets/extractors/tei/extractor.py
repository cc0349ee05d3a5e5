"""tei: `*.xml` in the TEI namespace, three structures, one streaming parser (extraction-formats:
tei; ADDENDUM 6 as amended by D3, D4, D6, D12, D13, D19, D21 and S3, S6-S9).

Per file (S7): scan.py decides the structure, then one streaming lxml pass with start/end
events (streaming.py) extracts it: annotated.py (per-file and utterance documents) or plain.py
(paragraphs, and D19 plain utterances). There is no size threshold: a 1 KB and a 10 GB file take
the same code (D12), and memory is bounded by the largest document, not by the file.

Errors (D6, S3): a parse error or bytes invalid for the declared encoding keep the documents
closed before it, drop the one in progress (a per-file document whole) and skip the rest of the
file, with one drop naming the file and line. Only events lxml reports after a feed that did not
raise are used (xml.events), so what an error keeps is the same under every lxml release. An
unreadable file is skipped and counted.

Parser limits (xml.retry, shared with macocu): libxml2's defaults (text nodes up to 10 MB, nesting
up to 256) apply first. A file that hits one is parsed again with huge_tree (text nodes up to 1 GB,
nesting up to 2048), resuming after the documents and drops already delivered, so the output does
not depend on the retry. Entity amplification (billion laughs) is refused either way, and no
entity is ever expanded, so an external entity (XXE) is never read.
"""

from collections.abc import Iterator

from ...schema import Document
from ..extract_context import ExtractContext
from ..input_file import InputFile
from ..tsv_metadata import TsvSidecarExtractor
from ..xml.retry import extract_with_retry
from .annotated import AnnotatedPass
from .plain import PlainPass, PlainUtterancePass
from .scan import ANNOTATED, PLAIN_UTTERANCES, detect_structure

PASSES = {ANNOTATED: AnnotatedPass, PLAIN_UTTERANCES: PlainUtterancePass}


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
        pass_class = PASSES.get(structure, PlainPass)
        cap = ctx.max_document_bytes
        yield from extract_with_retry(ctx, file, lambda drop: pass_class(row, drop, file.stem, cap))
