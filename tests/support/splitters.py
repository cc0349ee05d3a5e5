"""The registry's splittable formats: what the split tests and the cut-rule table take their lists from."""

from slm4ie_assets.extractors.registry import EXTRACTORS, get_extractor_class
from slm4ie_assets.extractors.splitting import Splitter


def splitters() -> dict[str, Splitter]:
    """Every registered extractor that has a splitter, by name, in the registry's order."""
    found = {}
    for name in EXTRACTORS:
        splitter = get_extractor_class(name).splitter
        if splitter is not None:
            found[name] = splitter
    return found
