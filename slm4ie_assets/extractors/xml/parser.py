"""The lxml parser settings every tei and macocu parse shares (security and size limits)."""

from typing import Any, TypeVar

from lxml import etree


def parser_options(huge: bool, collect_ids: bool = False) -> dict[str, Any]:
    """Safe lxml settings: no entity is expanded (an external entity is never read, an internal one
    stays an unexpanded reference), nothing is fetched from the network. libxml2 refuses entity
    amplification (billion laughs) with or without `huge_tree`; `huge_tree` only lifts the
    text-node size and nesting-depth limits (depth stays capped at 2048), and is turned on for a
    file only after the default limits refused it (see xml.retry).

    `collect_ids=False` (tei): libxml2 builds no table of xml:id values (6-10% of the parse on files
    with an id on every token). A side effect: an xml:id that is not an XML name (blank, `1.2`)
    is not a parse error; it is read as it is, and a blank one is a missing id (D4). Another (lxml
    6.1/6.2 with libxml2 2.14): a feed parser that collects no ids reads the external DTD subset a
    DOCTYPE names from the local disk (never from the network); its entities are still never
    expanded, but a DOCTYPE could so make a worker read any local file (a FIFO would hang it):
    `refuse_external` stops that. macocu reads with `collect_ids=True`, which loads no DTD: it read through lxml's
    iterparse, which always collects ids whatever it is told, and its feed parser keeps that
    (xml.events), so its log, and with it its drops and split cuts, stay as they were."""
    return dict(resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False, huge_tree=huge,
                collect_ids=collect_ids)


class _NoExternal(etree.Resolver):
    """Answers every request for an external resource (a DTD a DOCTYPE names) with empty text, so
    no file outside raw/<key>/ is ever opened and a parse never depends on the working folder."""

    def resolve(self, system_url, public_id, context):
        return self.resolve_string("", context)


P = TypeVar("P", etree.XMLParser, etree.XMLPullParser)


def refuse_external(parser: P) -> P:
    """`parser`, which now opens no external resource (docs/guarantees.md 4, "Nothing escapes raw/<key>/")."""
    parser.resolvers.add(_NoExternal())
    return parser
