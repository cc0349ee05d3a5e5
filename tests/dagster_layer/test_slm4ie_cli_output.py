"""One escaping for everything `slm4ie` prints (cli/output.py): every C0 and C1 control, DEL, the line and
paragraph separators and every format character (Unicode category Cf, bidi controls among them) shows as a
visible escape, on the terminal and in JSON, and nothing else changes."""

import json
import sys
import unicodedata

from slm4ie_assets.cli.output import json_text, shown, shown_lines, shown_message

UNSAFE = ([chr(c) for c in range(0x20)] + [chr(c) for c in range(0x7F, 0xA0)] + ["\u2028", "\u2029"]
          + [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"])


def test_every_control_and_format_character_is_escaped_and_nothing_else():
    assert len(UNSAFE) > 64 + 2 + 150  # the running Python's Cf list was read
    for ch in UNSAFE:
        out = shown(f"a{ch}b")
        assert ch not in out and out.startswith("a\\") and out.endswith("b"), (hex(ord(ch)), out)
    for text in ("rdeče žabe", "Ljubljana 2024: 5 % več", "emoji 🐸", "naprej\\x1b", "ﬁ ǅ ℃"):
        assert shown(text) == text  # letters, symbols and a backslash stay as they are


def test_the_escapes_name_the_character():
    assert shown("\x1b[2J\x07") == "\\x1b[2J\\x07"
    assert shown("tab\there\r\nnext") == "tab\\there\\r\\nnext"
    assert shown("\x7f\x85\x9b") == "\\x7f\\x85\\x9b"
    assert shown("\u202eevil\u2066\u200b\ufeff") == "\\u202eevil\\u2066\\u200b\\ufeff"
    assert shown("tag\U000e0041") == "tag\\U000e0041"
    assert shown(42) == "42"


def test_document_text_keeps_its_lines_and_messages_keep_theirs():
    assert shown_lines("prva\x1b\ndruga\u202e\r") == ["prva\\x1b", "druga\\u202e\\r"]
    assert shown_message("run summary\n  shards  4\n  a\u202eb") == "run summary\n  shards  4\n  a\\u202eb"


def test_json_escapes_the_same_characters_and_stays_the_same_data():
    value = {"text": "".join(UNSAFE), "name": "a\u202eb\U000e0041"}
    for indent in (False, True):
        out = json_text(value, indent=indent)
        assert not any(ch in out for ch in UNSAFE if ch != "\n"), "a raw control or format character in JSON"
        assert json.loads(out) == value
    assert json_text("\u202e\U000e0041") == '"\\u202e\\udb40\\udc41"'
