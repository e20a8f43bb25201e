# The two commands of the README: `make demo` and `make test`. Each builds .venv from nothing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint bench clean

venv: $(STAMP)

$(STAMP): requirements.txt setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch pinned first: an unpinned torch pulls the multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -r requirements.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

demo: $(STAMP)
	$(BIN)/gp-mapper demo --out out/demo

test: $(STAMP)
	$(BIN)/ruff check gp_mapper test benchmarks launch
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check gp_mapper test benchmarks launch
	$(BIN)/ruff format --check gp_mapper test benchmarks

bench: $(STAMP)
	$(BIN)/pip install --quiet gpytorch
	$(BIN)/python benchmarks/magnetic_streaming.py

clean:
	rm -rf $(VENV) out build install log *.egg-info
