"""Deploy artefacts generated from code: the Grafana dashboard (`python -m deploygen`)."""
