"""Archives built in memory and the files an unpack leaves, for the archive tests (D16)."""

import io
import tarfile
from pathlib import Path


def tar_of(members: dict[str, bytes], mode: str = "w") -> bytes:
    """A tar (pax format) of regular files, name -> bytes, in order; `mode` "w:gz" for tarfile's
    own gzip stream."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=tarfile.PAX_FORMAT) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def files_under(root: Path) -> set[str]:
    """Every file under `root`, as paths relative to it."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
