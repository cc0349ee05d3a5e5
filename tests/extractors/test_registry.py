"""The extractor registry and the classes it names stay together: a registry key is its class's
`name`, every concrete extractor class is registered, and loading the registry imports no format."""

import importlib
import inspect
import json
import pkgutil
import subprocess
import sys

import pytest

import slm4ie_assets.extractors as extractors_package
from slm4ie_assets.extractors.base import Extractor
from slm4ie_assets.extractors.registry import EXTRACTORS, get_extractor_class, make_extractor


@pytest.mark.parametrize("key", sorted(EXTRACTORS))
def test_each_registry_key_is_the_name_of_the_extractor_class_it_points_to(key):
    cls = get_extractor_class(key)
    assert inspect.isclass(cls) and issubclass(cls, Extractor)
    assert cls.name == key
    assert make_extractor(key, None).name == key


def _all_extractor_modules():
    prefix = extractors_package.__name__ + "."
    return [info.name for info in pkgutil.walk_packages(extractors_package.__path__, prefix)]


def test_every_named_extractor_class_in_the_package_is_registered_under_its_name():
    """Adding a format is one module plus one registry line: a named class the registry does not
    know (or knows under another module) fails here."""
    found = {}
    for module_name in _all_extractor_modules():
        module = importlib.import_module(module_name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Extractor) and cls.__module__ == module_name and cls.name:
                assert cls.name not in found, f"two classes are named {cls.name!r}"
                found[cls.name] = f"{module_name.removeprefix(extractors_package.__name__ + '.')}:{cls.__name__}"
    assert found == EXTRACTORS


def test_unknown_name_lists_the_known_ones():
    known = ", ".join(sorted(EXTRACTORS))
    assert {"coleslaw", "conllu", "huggingface", "json", "jsonl", "macocu", "tei", "text"} <= set(EXTRACTORS)
    with pytest.raises(KeyError, match=f"unknown extractor 'nope' \\(known: {known}\\)"):
        get_extractor_class("nope")


def test_loading_the_registry_and_the_catalog_imports_no_extractor_module():
    """The classes are imported on first use, so the catalog never pays for a format it does not use."""
    code = ("import json, sys\n"
            "import slm4ie_assets.catalog, slm4ie_assets.extractors.registry as r\n"
            "mods = ['slm4ie_assets.extractors.' + t.split(':')[0] for t in r.EXTRACTORS.values()]\n"
            "print(json.dumps([m for m in mods if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == []
