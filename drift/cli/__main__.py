"""`python -m drift.cli ...`: the `drift` command without its console script."""

from drift.cli import main

main()
