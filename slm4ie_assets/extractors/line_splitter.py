"""Where jsonl and coleslaw cut a file: right after a `\\n` (docs/splitting.md).

The rule mirrors their reader, `json_objects._range_lines`, which reads a range as `\\n`-ended byte
lines; a file whose lines end in a lone `\\r` is therefore never cut.
"""

from .splitting import ByteSplitter


class LineSplitter(ByteSplitter):
    """Cuts a JSON-lines file right after a `\\n`."""

    cut_rule = ("right after a `\\n` (a lone-`\\r` file is not cut: its lines are read as `\\n`-ended "
                "bytes)")
    speculative = True  # its records carry their own ids; a fallback id, drop or repair stops it

    def cut_in(self, data: bytes, not_before: int, at_eof: bool) -> int | None:
        nl = data.find(b"\n", max(0, not_before - 1))
        return nl + 1 if nl >= 0 else None
