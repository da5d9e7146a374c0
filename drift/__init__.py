"""drift: measure how models decay under temporal distribution shift (the "Drift Happens" protocol).

Importing drift, or any module of it, leaves the process as it found it: the pinned CPU code path
(drift.core.environment) is applied by the entry points that compute results (the stage scripts, the `drift`
command, Ray's workers, the benchmarks), before numpy and torch load."""

__version__ = "0.1.0"
