"""What stopped an XML parse (tei, macocu), and what to do about it (D6, S3)."""

from lxml import etree

_RESOURCE_LIMIT = getattr(etree.ErrorTypes, "ERR_RESOURCE_LIMIT", 114)
_BAD_BYTES = frozenset({etree.ErrorTypes.ERR_INVALID_ENCODING, etree.ErrorTypes.ERR_INVALID_CHAR,
                        etree.ErrorTypes.ERR_UNKNOWN_ENCODING, etree.ErrorTypes.ERR_UNSUPPORTED_ENCODING})


def first_error(log, exc: etree.ParseError) -> tuple:
    """(line, libxml2 code, message) of the error that stopped the parse. lxml's exception text
    can be generic ("no element found") while the parse's own log (a feed parser's
    `feed_error_log`, an iterparse's `error_log`) holds the cause. Never `exc.error_log`: for a
    parse that was fed nothing (an empty file) it is lxml's thread-global log, which still holds
    the errors of earlier files."""
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
