"""Extractor name -> class. Adding a format is one module plus one line here."""

from .base import Extractor
from .json import JsonExtractor
from .jsonl import JsonlExtractor
from .text import TextExtractor

EXTRACTORS: dict[str, type[Extractor]] = {
    "text": TextExtractor,
    "jsonl": JsonlExtractor,
    "json": JsonExtractor,
}


def get_extractor_class(name: str) -> type[Extractor]:
    try:
        return EXTRACTORS[name]
    except KeyError:
        raise KeyError(f"unknown extractor {name!r} (known: {', '.join(sorted(EXTRACTORS))})") from None


def make_extractor(name: str, options) -> Extractor:
    return get_extractor_class(name)(options)
