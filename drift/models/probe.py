"""Frozen-encoder probes (paper Tables 4, 12, 20): a linear head on the encoder's pooled vector."""

import torch.nn as nn


class LinearProbe(nn.Module):
    """The only trainable part of a frozen-encoder model: D * n_outputs + n_outputs parameters."""

    def __init__(self, spec, n_outputs):
        super().__init__()
        self.head = nn.Linear(spec.shape[0], n_outputs)

    def forward(self, x):
        return self.head(x)
