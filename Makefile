# `make demo`: set up (idempotent) and run the main job on the embedded model.
# `make test`: set up (idempotent) and run the whole test suite.
# `make lint`: ruff, the module graph's import contracts (lint-imports) and mypy ([tool.mypy]).
# `make bench`: list the benchmarks of bench/; `make bench NAME=probe ARGS="--repeats 3"` runs one
# (bench/probe.py; docs/performance.md).
.PHONY: setup demo test lint bench

setup:
	bash scripts/setup.sh

# exit 1 is a verdict, not a crash: the quickstart's second gate is undecided at 4 samples
demo: setup
	.venv/bin/harness run configs/quickstart.yaml || test $$? -eq 1

test:
	bash scripts/setup.sh --browser
	.venv/bin/python -m pytest

# ruff, then the module graph's contracts ([tool.importlinter] in pyproject.toml), then mypy
# --strict on the typed core ([tool.mypy]: pipeline, stages, result rows, the engine protocol)
lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .
	.venv/bin/lint-imports --no-cache --no-logo
	PYTHONPATH=$(CURDIR) .venv/bin/mypy

# the checkout's code, not an installed copy's: the benchmarks measure this tree
bench: setup
	PYTHONPATH=$(CURDIR) .venv/bin/python bench/_index.py $(NAME) $(ARGS)
