# The two commands of the README: `make demo` and `make test`. Each builds .venv from nothing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint bench gpu-check gpu-wheels clean

venv: $(STAMP)

$(STAMP): requirements.txt requirements-build.txt setup.py tools/build_tf2_msgs.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch pinned first: an unpinned torch pulls the multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -r requirements.txt
	$(BIN)/pip install --quiet --no-deps -e .
	# tf2_msgs has no wheel: built from vendor/tf2_msgs (skipped where it already imports).
	$(BIN)/python tools/build_tf2_msgs.py
	touch $@

demo: $(STAMP)
	$(BIN)/gp-mapper demo --out out/demo

test: $(STAMP)
	$(BIN)/ruff check gp_mapper test benchmarks launch tools
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check gp_mapper test benchmarks launch tools
	$(BIN)/ruff format --check gp_mapper test benchmarks tools

bench: $(STAMP)
	$(BIN)/pip install --quiet gpytorch
	$(BIN)/python benchmarks/magnetic_streaming.py

# The GPU path measured in one run (benchmarks/gpu_check.py); a dry run where there is no CUDA.
gpu-check:
	bash benchmarks/gpu_env.sh benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

# Wheels of the check's non-torch requirements for a GPU machine with no package registry
# (Python GPU_PYVER there); gpu_env.sh installs them from .whl.
GPU_PYVER ?= 3.12
gpu-wheels:
	$(PYTHON) -m pip download --quiet --no-deps --only-binary=:all: --python-version $(GPU_PYVER) \
		--implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2014_x86_64 -d .whl \
		rosbags==0.11.9 lz4==4.4.5 ruamel.yaml==0.19.1 apsw==3.54.1.0 backports.zstd==1.8.0

clean:
	rm -rf $(VENV) .venv-gpu .gpu-site out build install log *.egg-info
