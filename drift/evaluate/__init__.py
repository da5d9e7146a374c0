"""Checkpoints over slices into drift-matrix cells, and the label-free estimates of those cells."""
