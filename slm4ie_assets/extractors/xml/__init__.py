"""What the streaming XML extractors (tei, macocu) share: safe parser options, the event source and
its rule for parse errors (events), what stopped a parse, the one retry driver (huge_tree, careful
re-read, S3's stop) that a whole file and a macocu range both run, the text collector and the TEI
names it reacts to. macocu's range code is its own (extractors/macocu/)."""
