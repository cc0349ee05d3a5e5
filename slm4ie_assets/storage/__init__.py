"""Where bytes live: a folder on a disk or a prefix in a bucket, behind one interface (`base.Store`)."""
