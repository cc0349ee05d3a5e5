"""The macocu extractor (extractor.py) and its paths: the streaming pass over `<doc>` elements
(doc_pass), and for a split file (docs/splitting.md) where it is cut (doc_cuts), how one range is
read as one pass would read it (ranges, over the bytes of range_source) and libxml2's log across
the ranges (range_log)."""
