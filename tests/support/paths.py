"""Where the checkout, the shared corpora and this venv's executables are."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
CORPORA = SHARED / "corpora"
VENV_BIN = Path(sys.executable).parent
