"""Results in MLflow: every benchmark run, probe and evaluation as one MLflow run."""
