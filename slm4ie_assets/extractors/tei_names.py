"""Qualified names the TEI extractor reacts to (ADDENDUM 6: only the TEI namespace counts, so an
un-namespaced `<w>` or `<p>` is invisible) and the parser settings every TEI parse shares."""

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


def parser_options(huge: bool) -> dict:
    """Safe lxml settings: no DTD is loaded, no entity is expanded (an external entity is never
    read, an internal one stays an unexpanded reference), nothing is fetched from the network.
    libxml2 refuses entity amplification (billion laughs) with or without `huge_tree`; `huge_tree`
    only lifts the text-node size and nesting-depth limits (depth stays capped at 2048), and is
    turned on for a file only after the default limits refused it (see tei.py).

    `collect_ids=False`: libxml2 builds no table of xml:id values (6-10% of the parse on files
    with an id on every token). A side effect: an xml:id that is not an XML name (blank, `1.2`)
    is not a parse error; it is read as it is, and a blank one is a missing id (D4)."""
    return dict(resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False, huge_tree=huge,
                collect_ids=False)
