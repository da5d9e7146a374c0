"""The paper's definitions as the code that runs: slices and the split (Sections 4.1-4.2), the cells of M,
tasks and losses (4.3), metrics (Appendix B), ID / Future / Decay and the cohort (4.5)."""
