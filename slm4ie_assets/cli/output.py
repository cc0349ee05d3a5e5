"""What `slm4ie` writes to a terminal: corpus text and file names are data, never terminal commands;
and a refusal is one line (`UsageError`: exit status 2).

A corpus can hold ESC sequences (clear the screen, retitle the window), carriage returns and
bidirectional overrides (text that shows other than it reads), and a file name can hold a newline
that would print as a line of its own or a right-to-left override that makes a shard's name and
state read backwards. Every command shows every name and text it prints through `shown()`, one
escaping for all of them: C0 controls (tab and newline included), DEL, C1 controls, the line and
paragraph separators, and every format character (Unicode category Cf: bidi embeddings, overrides,
isolates and marks, zero-width characters, the BOM, ...) become visible escapes: `\\n`, `\\r`,
`\\t`, `\\x1b`, `\\u202e`, `\\U000e0041`. JSON output escapes the same characters the JSON way
(`\\u001b`, `\\u202e`), so it stays valid JSON and safe to `cat`.

Shard keys are names of their own spelling: planning writes a control character in a file name as
`%1B` in the key (the partition key the UI shows and `--shard` takes), so a key passes `shown()`
unchanged unless it holds one of the characters above that keys keep as they are (C1, Cf).
"""

import re
from typing import Any

import orjson

# Unicode category Cf (format characters), as of Unicode 15.1; tests/dagster_layer/test_slm4ie_cli_output.py
# holds this list to the running Python's unicodedata, so a newer Unicode's additions are noticed.
_FORMAT = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
           "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
           "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{_FORMAT}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape(ch: str) -> str:
    """One unsafe character as the escape `shown()` writes for it."""
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: Any) -> str:
    """`text` as one safe line for a terminal."""
    return _UNSAFE.sub(lambda m: escape(m.group()), str(text))


def shown_lines(text: str) -> list[str]:
    """A document's text line by line (its newlines kept as lines), each line made safe."""
    return [shown(line) for line in text.split("\n")]


def shown_message(text: str) -> str:
    """A message of ours that may span lines (a progress table, a summary): each line made safe, the
    line breaks kept."""
    return "\n".join(shown_lines(text))


# orjson escapes C0 itself; the rest can only sit inside JSON strings, where `\uXXXX` means the same
_JSON_UNSAFE = re.compile(f"[\x7f-\x9f\u2028\u2029{_FORMAT}]")


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON spells a character beyond the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(value: Any, indent: bool = False) -> str:
    """`value` as JSON (UTF-8 kept) with the characters `shown()` escapes written as JSON escapes."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0).decode()
    return _JSON_UNSAFE.sub(lambda m: _json_escape(m.group()), text)


class UsageError(Exception):
    """A bad argument (a flag, a dataset, shard or field that is not there, a catalog file that is
    missing): `main` prints it as one line on stderr, escaped, and exits 2."""
