"""One shard -> one committed part: documents encoded, sidecar, meta written last."""
