"""The output folder: layout, records, locks, clean-up, and the publish of a version."""
