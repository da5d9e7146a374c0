"""Drift read without labels and acted on: the shift matrix, novelty, retraining policies."""
