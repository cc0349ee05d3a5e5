"""Extractor name -> class. Adding a format is one module plus one line here.

Classes are imported on first use, so loading the catalog never pays for a format it does not use.
"""

import importlib

from .base import Extractor

EXTRACTORS: dict[str, str] = {
    "text": "text:TextExtractor",
    "jsonl": "jsonl:JsonlExtractor",
    "json": "json:JsonExtractor",
    "conllu": "conllu:ConlluExtractor",
    "tei": "tei.extractor:TeiExtractor",
    "macocu": "macocu.extractor:MacocuExtractor",
    "coleslaw": "coleslaw:ColeslawExtractor",
    "huggingface": "huggingface:HuggingfaceExtractor",
}


def get_extractor_class(name: str) -> type[Extractor]:
    try:
        target = EXTRACTORS[name]
    except KeyError:
        raise KeyError(f"unknown extractor {name!r} (known: {', '.join(sorted(EXTRACTORS))})") from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), cls)


def make_extractor(name: str, options) -> Extractor:
    return get_extractor_class(name)(options)
