"""macocu: the MaCoCu monolingual XML, `<doc>` elements of `<p>` paragraphs, streamed.

ADDENDUM 4.6 with DECISIONS D6/S3 (a parse error or bad bytes keep the documents closed before
it and skip the rest of the file, counted; what closed before it is read as xml.events says, the
same under every lxml release) and D13 (a nested `<doc>` or `<p>` belongs to the outermost one, so
no text is emitted twice). Memory stays bounded by one `<doc>`: each finished element is cleared
and detached from the tree together with everything before it (doc_pass). Parser limits and
errors are shared with tei (xml.retry): a file over libxml2's default limits (text nodes of 10 MB,
nesting of 256) is read again with huge_tree, bounded as tei is.

Security: no DTD is loaded, nothing is fetched from the network and no entity is expanded, so no
external entity is ever read. Entities as in tei: a reference to an entity the file declares
(internal or SYSTEM) is left out of the text and counted as `unexpanded_entity`; a reference to an
undeclared one (under a DOCTYPE whose external DTD is not loaded) stays verbatim in the text and
is counted per file as `undefined_entity` (ADDENDUM 4.6 Errors).

Splitting (docs/splitting.md): a file over `split_bytes` is cut at top-level `<doc>` elements
(doc_cuts) and each range is parsed with the file's own prolog (ranges), giving the
bytes of one pass: documents, ids, drops, warnings and their lines, the per-file entity counts.
"""

from collections.abc import Iterator

from ...schema import Document
from ..base import Extractor
from ..extract_context import ExtractContext
from ..input_file import InputFile
from ..xml.retry import extract_with_retry
from .doc_cuts import DocSplitter
from .doc_pass import MacocuPass
from .ranges import RangeState, extract_doc_range


class MacocuExtractor(Extractor):
    name = "macocu"
    patterns = (".xml",)
    splitter = DocSplitter(carry=RangeState)

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        cap = ctx.max_document_bytes  # a <doc> lets its paragraphs go past it (docs/memory.md)
        if file.range is None:
            yield from extract_with_retry(ctx, file, lambda drop: MacocuPass(drop, cap=cap))
        else:
            yield from extract_doc_range(ctx, file, lambda drop, earlier, ends: MacocuPass(drop, earlier, ends, cap))
