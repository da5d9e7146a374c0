"""Training heads cumulatively per cutoff: the loop, the batched engine, the slice data they read."""
