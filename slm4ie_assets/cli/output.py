"""What `slm4ie` writes to a terminal: corpus text and file names are data, never terminal commands.

A corpus can hold ESC sequences (clear the screen, retitle the window), carriage returns and
bidirectional overrides (text that shows other than it reads), and a file name can hold a newline
that would print as a line of its own. Everything shown passes `shown()`: control characters,
C1 codes and bidi controls become visible escapes (`\\x1b`, `\\n`, `\\u202e`), tabs stay. JSON output
escapes the same characters the JSON way, so it stays valid JSON and safe to `cat`.
"""

import re
from typing import Any

import orjson

# C0 controls but the tab, DEL, C1 controls, line/paragraph separators, bidi embeddings and isolates
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def shown(text: Any) -> str:
    """`text` as one safe line for a terminal."""
    return _UNSAFE.sub(_escape, str(text))


def shown_lines(text: str) -> list[str]:
    """A document's text line by line (its newlines kept as lines), each line made safe."""
    return [shown(line) for line in text.split("\n")]


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")  # orjson escapes the C0 ones


def json_text(value: Any, indent: bool = False) -> str:
    """`value` as JSON (UTF-8 kept) with the characters above written as `\\uXXXX`: they can only sit
    inside strings, where the escape means the same."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0).decode()
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
