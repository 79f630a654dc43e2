"""The parity runner: real repositories' hooks, run bare and through cloudrunner, compared.

`python -m bench.parity.obtain CACHE_DIR --parity DIR` fills a cache (outside the project)
with each repository at its commit; `python -m bench.parity CACHE_DIR` lays each one out
fresh per event, runs the event bare and through `cloudrunner serve` + `cloudrunner hook`,
and prints what differs and why. See bench/README.md, "Parity".
"""
