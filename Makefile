# The developer's loop. `make test` is the README's test command; CI runs `.ci/run`.
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install lint types test-fast test cov

install:  ## a venv with ocrq and the dev tools
	python3 -m venv $(VENV) && $(BIN)/pip install -e ".[dev]"

lint:  ## ruff: lint and the format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types:  ## mypy --strict over the ocrq namespace
	$(BIN)/mypy

test-fast:  ## unit tests only: no producer, worker or fake-vLLM processes (well under a minute)
	$(BIN)/pytest -q -m "not slow"

test:  ## the full suite (the README's test command)
	$(BIN)/pytest -q

cov:  ## the full suite with a coverage report of the ocrq namespace
	$(BIN)/pytest -q --cov=ocrq --cov=producer --cov=consumer --cov=shared --cov=fakevllm \
		--cov-report=term-missing:skip-covered
