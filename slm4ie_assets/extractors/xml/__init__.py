"""What the streaming XML extractors (tei, macocu) share: safe parser options, the event source and
its rule for parse errors (events), what stopped a parse, the huge_tree and careful retry loop, the
text collector and the TEI names it reacts to."""
