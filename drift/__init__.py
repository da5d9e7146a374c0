"""drift: measure how models decay under temporal distribution shift (the "Drift Happens" protocol)."""

__version__ = "0.1.0"
