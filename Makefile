# `make demo`: set up (idempotent) and run the main job on the embedded model.
# `make test`: set up (idempotent) and run the whole test suite.
# `make bench`: list the benchmarks of bench/ (`harness bench NAME` runs one; docs/performance.md).
.PHONY: setup demo test lint bench

setup:
	bash scripts/setup.sh

demo: setup
	.venv/bin/harness run configs/quickstart.yaml

test:
	bash scripts/setup.sh --browser
	.venv/bin/python -m pytest

lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

bench: setup
	.venv/bin/harness bench
