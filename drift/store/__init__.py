"""What is stored between stages: the slice table, the embedding store, the feature files, and the
checkpoint and cell caches."""
