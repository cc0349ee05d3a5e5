"""What the streaming XML extractors (tei, macocu) share: safe parser options, what stopped a
parse, the huge_tree retry loop, the text collector and the TEI names it reacts to."""
