"""Qualified names the TEI extractor reacts to (ADDENDUM 6: only the TEI namespace counts, so an
un-namespaced `<w>` or `<p>` is invisible). Shared because the text collector (xml.text), used by
macocu too, applies the TEI `<choice>` rule (S6)."""

TEI_NS = "http://www.tei-c.org/ns/1.0"
_T = "{" + TEI_NS + "}"

XML_ID = "{http://www.w3.org/XML/1998/namespace}id"

TEI = _T + "TEI"
TEI_CORPUS = _T + "teiCorpus"
TEI_HEADER = _T + "teiHeader"
TEXT = _T + "text"
BODY = _T + "body"
S = _T + "s"
U = _T + "u"
W = _T + "w"
PC = _T + "pc"
P = _T + "p"
SEG = _T + "seg"
NOTE = _T + "note"
CHOICE = _T + "choice"

# <choice> readings in order of preference (S6); without any of them the first child is read.
CHOICE_PREFERENCE = tuple(_T + name for name in ("reg", "corr", "expan", "orig", "sic", "abbr"))

# Block-level containers: outside a document in progress, the end of one is a safe point to free
# everything before it, so memory stays bounded even across long stretches with no sentence,
# utterance or paragraph (empty milestones such as <lb/> are left out: they are too frequent).
BLOCKS = tuple(_T + name for name in (
    "TEI", "teiHeader", "text", "front", "body", "back", "group", "div", "div1", "div2", "div3",
    "p", "ab", "head", "note", "lg", "l", "sp", "list", "item", "table", "row", "quote",
    "floatingText", "figure",
))

