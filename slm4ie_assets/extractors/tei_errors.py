"""What stopped a TEI parse, and what to do about it (D6, S3)."""

from lxml import etree

_RESOURCE_LIMIT = getattr(etree.ErrorTypes, "ERR_RESOURCE_LIMIT", 114)
_BAD_BYTES = frozenset({etree.ErrorTypes.ERR_INVALID_ENCODING, etree.ErrorTypes.ERR_INVALID_CHAR,
                        etree.ErrorTypes.ERR_UNKNOWN_ENCODING, etree.ErrorTypes.ERR_UNSUPPORTED_ENCODING})


def first_error(parser, exc: etree.ParseError) -> tuple:
    """(line, libxml2 code, message) of the error that stopped the parse. lxml's exception text
    can be generic ("no element found") while the feed parser's own log holds the cause."""
    logs = [parser.feed_error_log] if parser is not None else []
    logs.append(getattr(exc, "error_log", None))
    for log in logs:
        for entry in log or ():
            if entry.level >= etree.ErrorLevels.ERROR:
                return entry.line or None, entry.type, entry.message.strip()
    return exc.lineno or None, exc.code, (exc.msg or str(exc)).strip()


def is_resource_limit(code: int, message: str) -> bool:
    """A libxml2 size limit that huge_tree lifts (text node over 10 MB, nesting over 256, ...): its
    message says "XML_PARSE_HUGE". Entity amplification (billion laughs) has the same error code
    but is never retried: it must stay refused whatever a libxml2 version does under huge_tree."""
    return code == _RESOURCE_LIMIT and "XML_PARSE_HUGE" in message and "amplification" not in message


def reason_for(code: int) -> str:
    """The drop-ledger reason: bytes invalid for the declared encoding, or any other XML error."""
    return "invalid_bytes" if code in _BAD_BYTES else "xml_syntax_error"
