# Sluice: every target installs what it needs first. From a fresh clone: `make demo`, `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help install test lint typecheck unit demo bench clean

help:
	@echo "make demo   crawl the bundled demo site end to end and print a summary"
	@echo "make test   lint, type-check and run the whole test suite"
	@echo "make bench  measure throughput and CPU per page against Scrapy and httpx+BeautifulSoup"

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $@

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check functions tests bench
	$(BIN)/ruff format --check functions tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile

test: lint typecheck unit

demo: $(STAMP)
	$(BIN)/sluice demo

bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
