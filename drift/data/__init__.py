"""From a raw source to canonical records: the dataset readers, the ingest driver and its ledger, downloads."""
