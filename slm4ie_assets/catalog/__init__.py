"""extract.yaml -> typed Catalog / DatasetSpec, validated whole (docs/architecture.md).

The public names live in `spec`; they are importable from here, as they always were."""

from .spec import (
    CONFIG_ENV,
    DEFAULT_MAX_SHARDS_PER_RUN,
    DEFAULT_SPLIT_BYTES,
    FORMAT_VERSION,
    PROJECT_ROOT,
    ArchiveLimits,
    Catalog,
    CatalogError,
    DatasetSpec,
    load_catalog,
    parse_catalog,
)

__all__ = [
    "ArchiveLimits",
    "CONFIG_ENV",
    "Catalog",
    "CatalogError",
    "DEFAULT_MAX_SHARDS_PER_RUN",
    "DEFAULT_SPLIT_BYTES",
    "DatasetSpec",
    "FORMAT_VERSION",
    "PROJECT_ROOT",
    "load_catalog",
    "parse_catalog",
]
