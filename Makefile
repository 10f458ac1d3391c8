# Sluice: every target installs what it needs first. From a fresh clone: `make demo`, `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

NODE_PKG := node-linux-$(if $(filter aarch64 arm64,$(shell uname -m)),arm64,x64)
NODE_BIN := $(CURDIR)/.tools/node_modules/$(NODE_PKG)/bin
CDK := node_modules/.bin/cdk
# Node 22 for jsii and the CDK CLI (the machine's Node 20 is end-of-life); no telemetry, no notices.
CDK_ENV := PATH="$(NODE_BIN):$(CURDIR)/$(BIN):$$PATH" JSII_NODE="$(NODE_BIN)/node" CDK_DISABLE_CLI_TELEMETRY=1
CDK_ARGS := --no-notices $(if $(STAGE),-c stage=$(STAGE)) $(if $(ALARM_EMAIL),-c alarm_email=$(ALARM_EMAIL)) \
	$(if $(EGRESS),-c egress=$(EGRESS)) $(if $(NAT_GATEWAYS),-c nat_gateways=$(NAT_GATEWAYS))

.PHONY: help install browser test lint typecheck unit demo bench bench-report cost scale clean synth deploy diff destroy bootstrap layer-report

help:
	@echo "make demo         crawl the bundled demo site end to end, print a summary and write its report"
	@echo "make test         lint, type-check and run the whole test suite (lint + typecheck + unit)"
	@echo "make lint         ruff check and ruff format --check"
	@echo "make typecheck    mypy --strict"
	@echo "make unit         the test suite on two workers"
	@echo "make install      the venv (.venv) and Debian's chromium for the report's browser test (as root)"
	@echo "make browser      only Debian's chromium"
	@echo "make bench        measure throughput and CPU per page against aiohttp+selectolax, Scrapy and httpx+BeautifulSoup"
	@echo "                  (~30 min; writes docs/benchmarks.md and the README's benchmark section)"
	@echo "make bench-report rewrite docs/benchmarks.md and the README's benchmark section from a kept result, no measuring"
	@echo "                  (ARGS=bench/results/bench-YYYYMMDD-HHMMSS.json; default: the newest)"
	@echo "make cost         meter every AWS call of real runs on moto and price them (writes docs/costs.md)"
	@echo "make scale        simulate 1M-100M URL nights of the deployed stack under AWS's limits (writes docs/scale.md;"
	@echo "                  ARGS=--json: one JSON object a scenario; ARGS=--check: a real local run against its prediction)"
	@echo "make synth        write the CloudFormation template to cdk.out/ (offline; EGRESS=fixed NAT_GATEWAYS=1|2)"
	@echo "make diff         cdk diff against the deployed stack (STAGE=NAME)"
	@echo "make bootstrap    cdk bootstrap, once per account and region"
	@echo "make deploy       deploy to the AWS account in your environment (after make bootstrap; ALARM_EMAIL=...)"
	@echo "make destroy      delete the stack (STAGE=NAME)"
	@echo "make layer-report build the arm64 layer and time each handler's cold import"
	@echo "make clean        remove the venv, caches, cdk.out, node_modules and .tools"
	@echo "make help         this list"

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $@

# Debian's Chromium for the report's browser test (tests/report): installed where this runs as root with apt-get
# (CI does); elsewhere this says so and goes on, and that test fails naming what is missing.
CHROMIUM := /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
		|| echo "make: Debian's chromium is not installed (needs root and apt-get): the report's browser test will fail" >&2

install: $(STAMP) browser

lint: $(STAMP)
	$(BIN)/ruff check functions tools infra tests bench
	$(BIN)/ruff format --check functions tools infra tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) browser
	$(BIN)/python -m pytest -n 2 --dist loadfile

test: lint typecheck unit

DEMO_STATE := .sluice/demo
demo: $(STAMP)
	@$(BIN)/sluice demo --state $(DEMO_STATE); status=$$?; \
		echo "the demo's report (open it in a browser):"; \
		$(BIN)/sluice report demo-books --state $(DEMO_STATE) --specs $(DEMO_STATE)/crawls \
			--out $(DEMO_STATE)/report.html && exit $$status

bench: $(STAMP)
	$(BIN)/python -m bench.run
	$(BIN)/python -m bench.many_hosts
	# Finalizing in shards: the section from kept results (measure: python -m bench.finalize_scale --synthetic N)
	$(BIN)/python -m bench.finalize_scale --doc
	$(BIN)/python -m bench.fanout

bench-report: $(STAMP)
	$(BIN)/python -m bench.report $(ARGS)

cost: $(STAMP)
	$(BIN)/python -m bench.cost

scale: $(STAMP)
	$(BIN)/python -m sluice_tools.scale $(ARGS)

$(CDK): package.json
	npm install --no-audit --no-fund --no-package-lock --loglevel=error
	npm install --prefix .tools --no-audit --no-fund --no-save --no-package-lock --loglevel=error $(NODE_PKG)@22.23.5
	@touch $@

synth: $(STAMP) $(CDK)
	$(CDK_ENV) $(CDK) synth $(CDK_ARGS) --quiet

diff: $(STAMP) $(CDK)
	$(CDK_ENV) $(CDK) diff $(CDK_ARGS)

bootstrap: $(STAMP) $(CDK)
	$(CDK_ENV) $(CDK) bootstrap $(CDK_ARGS)

deploy: $(STAMP) $(CDK)
	@if [ -z "$(ALARM_EMAIL)" ] && [ -z "$(NO_ALARM_EMAIL)" ]; then \
		echo "make deploy: set ALARM_EMAIL=you@example.com so the alarms page someone" >&2; \
		echo "  (or NO_ALARM_EMAIL=1 to deploy alarms nobody receives, and subscribe to the topic later)" >&2; \
		exit 2; \
	fi
	$(CDK_ENV) $(CDK) deploy $(CDK_ARGS) --require-approval broadening

destroy: $(STAMP) $(CDK)
	$(CDK_ENV) $(CDK) destroy $(CDK_ARGS)

layer-report: $(STAMP) $(CDK)
	$(CDK_ENV) $(BIN)/python -m infra.measure

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info cdk.out node_modules .tools
