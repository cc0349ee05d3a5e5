"""The project's code location, each extraction step held while the file $SLM4IE_TEST_HOLD exists.

A test needs a run that is still in its step when it kills the code server and the run worker;
the step has recorded its process by then (stale_runs.before_extraction runs first). Each held
step touches `held.<pid>` beside the hold file; removing the hold file lets every step go on.
"""

import os
import time
from pathlib import Path

import slm4ie_assets.dagster_layer.assets as assets
from slm4ie_assets.definitions import defs

_require_raw_dir = assets.require_raw_dir


def _held_require_raw_dir(spec):
    hold = Path(os.environ["SLM4IE_TEST_HOLD"])
    (hold.parent / f"held.{os.getpid()}").touch()
    while hold.exists():
        time.sleep(0.1)
    return _require_raw_dir(spec)


assets.require_raw_dir = _held_require_raw_dir

__all__ = ["defs"]
