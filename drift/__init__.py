"""drift: measure how models decay under temporal distribution shift (the "Drift Happens" protocol)."""

__version__ = "0.1.0"

from drift.core.environment import pin_cpu_code_path  # noqa: E402 - before any module imports torch

pin_cpu_code_path()  # the same numbers on any x86-64 with AVX2 (drift/core/environment.py CPU_CODE_PATH)
