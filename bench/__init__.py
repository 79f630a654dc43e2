"""cloudrunner's measuring instrument: `python -m bench` (see bench/README.md).

Every figure is measured in the same run as the bare baseline it is compared with, so a
busy machine moves both; tests only check that the benchmark runs (`--smoke`), never a time.
"""
