"""The base of every layer: errors, paths, progress, the environment record, the stage runner, the typed
params.yaml schema and presets, the encoder table, and the executor (local or Ray)."""
