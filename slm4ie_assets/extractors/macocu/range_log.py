"""libxml2's log across the ranges of a split MaCoCu file (docs/splitting.md, ADDENDUM 4.6, S3).

One parse keeps its first 100 warnings and, apart, its first 100 errors. What is read from the log
is the file's: the `undefined_entity` count and first entry at the end of the file, and the first
error when a parse stops (xml.retry: it also decides whether a limit hit is retried with huge_tree).
A range's own parse logs from zero, so the range that needs the file's log, when an earlier range
logged anything, gets the log of one pass over the bytes before it (`earlier_log`) and puts its own
after it (`combined_log`).
"""

from typing import BinaryIO

from lxml import etree

from ..xml.errors import first_error, is_resource_limit
from ..xml.events import FeedEvents
from ..xml.parser import parser_options
from .doc_cuts import Prolog
from .range_source import RangeSource

LOG_CAP = 100  # libxml2 keeps this many warnings (and, apart, errors) per parse
_WARNING = etree.ErrorLevels.WARNING
_ERROR = etree.ErrorLevels.ERROR
# 32 KiB feeds, as lxml's iterparse (which read this before xml.events) made them: where `_prefix_log`
# stops early it returns the log after a whole feed, which the same feeds keep the same
_ITERPARSE_CHUNK = 1 << 15


def combined_log(earlier: list, own) -> list:
    """The log one pass would hold: the file's log before the range, then the range's own entries
    while the warning cap is not reached (of the errors only the first is ever read)."""
    entries = list(earlier)
    warnings = sum(1 for e in earlier if e.level == _WARNING)
    for entry in own or ():
        if entry.level == _WARNING:
            if warnings >= LOG_CAP:
                continue
            warnings += 1
        entries.append(entry)
    return entries


def earlier_log(fh: BinaryIO, prolog: Prolog, start: int) -> tuple[list, bool]:
    """The log of one pass over the file's bytes before `start` (a cut the earlier ranges closed
    cleanly), and whether that pass reads with huge_tree by then (xml.retry: a limit hit before
    any error). Without a limit hit both modes log the same."""
    log, limit_hit = _prefix_log(fh, prolog, start, huge=False)
    if not limit_hit:
        return log, False
    return _prefix_log(fh, prolog, start, huge=True)[0], True


def _prefix_log(fh: BinaryIO, prolog: Prolog, start: int, huge: bool) -> tuple[list, bool]:
    """(log, stopped at a limit huge_tree lifts). It stops early once it holds 100 warnings and an
    error: nothing later can matter (a limit hit after an error is no retry but a stop). Only the
    log after a feed that did not raise is looked at early (xml.events); a raising feed decides by
    its log's first error, as the extracting pass does."""
    events = FeedEvents(None, _ITERPARSE_CHUNK, events=("end",), tag="doc", remove_comments=True, remove_pis=True,
                        **parser_options(huge, collect_ids=True))
    try:
        for batch in events.batches(RangeSource(fh, b"", 0, 0, start, prolog.close)):
            if _release_checking(batch, events.error_log):
                break
    except etree.ParseError as exc:
        code, message = first_error(events.error_log, exc)[1:]
        return list(events.error_log), not huge and is_resource_limit(code, message)
    return list(events.error_log), False


def _release_checking(batch, log) -> bool:
    """Free each `<doc>` of `batch`; True at the first once `log` holds 100 warnings and an error."""
    full = len(log) > LOG_CAP and sum(1 for e in log if e.level == _WARNING) >= LOG_CAP and \
        any(e.level >= _ERROR for e in log)
    for _, elem in batch:
        elem.clear(keep_tail=False)
        parent = elem.getparent()
        while parent is not None and elem.getprevious() is not None:
            del parent[0]  # the tree stays one document small
        if full:
            return True
    return False
