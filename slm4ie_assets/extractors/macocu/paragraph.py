"""The text of the open outermost `<p>` of a capped macocu pass (doc_pass, docs/memory.md), handed
over piece by piece while the parse goes on: counted exactly as the whole paragraph's
`str.strip()`ped text would be, kept only while its document stays within the cap."""


class Paragraph:
    """The text of the open outermost `<p>`, handed over piece by piece (`TextCollector.take`) while
    the parse goes on: what `str.strip()` leaves of it, kept while it fits `room` bytes, past them
    only its size. Leading whitespace is never kept; trailing whitespace is counted apart and
    becomes part of the text only when more text follows it, as strip() decides."""

    __slots__ = ("room", "kept", "size", "spaces")

    def __init__(self, room: int):
        self.room = room  # UTF-8 bytes the paragraph may have for its document to stay within the cap
        self.kept: list | None = [] if room > 0 else None  # None: past room, counted only
        self.size = 0  # bytes from the first non-whitespace character to the last so far
        self.spaces = 0  # bytes of the whitespace after the last one

    def add(self, text: str) -> None:
        """Count (and keep, within room) the next piece; a piece of many MB (a paragraph read
        whole) is measured by index, never copied whole (docs/memory.md)."""
        if not text:
            return
        start = 0 if self.size else _spaces_before(text)
        if start == len(text):
            return  # whitespace before the first character: stripped
        end = len(text) - _spaces_after(text)
        if end > start:
            self.size += self.spaces + _utf8_size(text, start, end)
            self.spaces = _utf8_size(text, end, len(text))
        else:
            self.spaces += _utf8_size(text, start, len(text))
        kept = self.kept
        if kept is None:
            return
        if self.size > self.room:
            self.kept = None
        elif self.size + self.spaces <= self.room:
            kept.append(text[start:])
        elif end > start:
            # the whitespace after it matters only if text follows, which then passes room
            kept.append(text[start:end])

    def text(self) -> str | None:
        """The stripped text; None past room."""
        return "".join(self.kept).rstrip() if self.kept is not None else None


_SCAN = 4096  # characters looked at at a time for whitespace at either end
_SLICE = 1 << 20  # characters encoded at a time to measure a long text


def _spaces_before(text: str) -> int:
    """How many characters `text.lstrip()` removes, copying no more than a slice of it."""
    for i in range(0, len(text), _SCAN):
        piece = text[i:i + _SCAN]
        rest = piece.lstrip()
        if rest:
            return i + len(piece) - len(rest)
    return len(text)


def _spaces_after(text: str) -> int:
    """How many characters `text.rstrip()` removes, copying no more than a slice of it."""
    end = len(text)
    while end:
        piece = text[max(0, end - _SCAN):end]
        rest = piece.rstrip()
        if rest:
            return len(text) - end + len(piece) - len(rest)
        end -= len(piece)
    return len(text)


def _utf8_size(text: str, start: int, end: int) -> int:
    """The UTF-8 size of `text[start:end]` (surrogatepass, as the encoder counts), encoded a slice at a time."""
    if text.isascii():
        return end - start
    return sum(len(text[i:min(i + _SLICE, end)].encode("utf-8", "surrogatepass")) for i in range(start, end, _SLICE))
