"""text: `*.txt`, blank-line separated blocks (CC100 convention), streamed line by line.

DECISIONS D9: a line that is empty or whitespace-only (Unicode whitespace, S4) ends a block; a
block's text is its lines joined with newlines, stripped. Ids are `<rel>:<n>` (ADDENDUM 4.1).
"""

from typing import Iterator

from ..schema import Document
from .base import BOM, ExtractContext, Extractor, InputFile, has_escapes, invalid_count, open_text


def _blocks(fh) -> Iterator[tuple[int, str]]:
    """(first line number, stripped text) of every block, blank ones included."""
    block: list[str] = []
    start = 0
    for lineno, line in enumerate(fh, 1):
        if lineno == 1 and line.startswith(BOM):
            line = line[1:]
        if line.isspace() or not line:
            if block:
                yield start, "\n".join(block).strip()
                block = []
            continue
        if not block:
            start = lineno
        block.append(line[:-1] if line[-1] == "\n" else line)
    if block:
        yield start, "\n".join(block).strip()


class TextExtractor(Extractor):
    name = "text"
    patterns = (".txt",)

    @classmethod
    def parse_options(cls, raw, where):
        return None  # the reference ignores `metadata:` for text

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        prefix = file.rel_stem
        index = 0
        seen_invalid = invalid_count()
        with open_text(file.path) as fh:
            for lineno, text in _blocks(fh):
                if not text:
                    continue
                if invalid_count() != seen_invalid and has_escapes(text):
                    ctx.drop("invalid_utf8", file, "invalid UTF-8 bytes; block skipped", lineno)
                    continue
                yield Document(text, f"{prefix}:{index:06d}")
                index += 1
