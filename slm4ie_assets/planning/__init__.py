"""Inputs -> shards: keys, fingerprints, input stamps, and which raw files have settled."""
