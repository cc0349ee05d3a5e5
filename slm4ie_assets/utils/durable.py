"""Making a rename, a link or an unlink durable: the folder that holds the name is fsynced, so the
name survives a power cut once the call returns (every commit point of the package relies on it)."""

import os
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
