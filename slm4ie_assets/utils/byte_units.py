"""Byte counts, rates and durations as people read them, shared by every log line that shows one.

Decimal units chosen by the size (B, kB = 10^3, MB = 10^6, GB = 10^9), so a sample corpus of a few
kB reads "12.3 kB" rather than "0.0 MB", and a rate never rounds to "0 MB/s" while bytes moved.
"""

BYTE_UNITS = ((10**9, "GB"), (10**6, "MB"), (10**3, "kB"))


def byte_unit(nbytes: int) -> tuple[int, str]:
    """The largest decimal unit not above `nbytes` (B below 1 kB)."""
    return next(((scale, name) for scale, name in BYTE_UNITS if nbytes >= scale), (1, "B"))


def in_unit(nbytes: int, scale: int) -> str:
    """`nbytes` in the unit of `scale`: whole bytes with separators, else one decimal."""
    return f"{nbytes:,}" if scale == 1 else f"{nbytes / scale:.1f}"


def human_bytes(nbytes: int) -> str:
    """`512 B`, `12.3 kB`, `4.5 MB`, `1.2 GB`."""
    scale, unit = byte_unit(nbytes)
    return f"{in_unit(nbytes, scale)} {unit}"


def human_rate(nbytes: int, seconds: float) -> str:
    """`340 kB/s`-style: the rate in the unit its own size calls for (a too-short time counts as 1 µs)."""
    return f"{human_bytes(round(nbytes / max(seconds, 1e-6)))}/s"


def duration(seconds: float) -> str:
    """`8.4s`, `3m05s`, `2h07m`."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"
