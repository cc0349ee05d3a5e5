"""The TEI extractor (extractor.py) and its paths: the structure scan (scan), the event stream the
passes share (streaming), the annotated per-file/utterance pass (annotated) with its tokens and
morphology (tokens, morphology), and the plain paragraph and utterance passes (plain)."""
