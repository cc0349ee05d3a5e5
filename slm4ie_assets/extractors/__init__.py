"""Dataset extractors, one small module per raw format."""
