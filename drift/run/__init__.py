"""Running a campaign: the dvc.yaml writer, the cost model, the pre-run model checks."""
