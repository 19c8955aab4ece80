# d2l-gpu: the same commands a newcomer types and CI runs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
BROWSER_STAMP := $(VENV)/.browser-installed
LAB_PORT ?= 8888
# What `make lab` serves, and extra `jupyter lab` options (the browser test passes a copy
# of notebooks/ and --no-browser).
LAB_ROOT ?= notebooks
LAB_OPTIONS ?=
# .ci/lab.py reads these two, and names them when their value is wrong.
export LAB_PORT LAB_ROOT
NOTEBOOK_SOURCES := $(wildcard notebooks/en/*.py notebooks/zh/*.py)
# gpu-check needs only a Python with torch: the venv when there is one, else $(PYTHON).
GPU_PYTHON ?= $(if $(wildcard $(PY)),$(PY),$(PYTHON))
GPU_REPORT ?= build/gpu-check
GPU_WHEELS ?= build/gpu-wheels
NBVAL := --nbval --nbval-current-env --nbval-cell-timeout=60 \
         --nbval-sanitize-with tests/nbval-sanitize.cfg -p no:cacheprovider

.DEFAULT_GOAL := help
.PHONY: help install lab test-browser test unit notebooks lint format sync execute bench \
        gpu-check gpu-wheels constraints clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The venv is rebuilt when pyproject.toml or constraints.txt change.
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

install: $(STAMP) ## create or refresh .venv with pinned, CPU-sized dependencies

# .ci/lab.py: the token travels in the environment, never on a command line; what
# Jupyter writes for the session goes to a private temporary folder, removed at the end.
lab: $(STAMP) ## open the lessons in JupyterLab on 127.0.0.1 with a fresh token, index first
	@$(PY) .ci/lab.py $(LAB_OPTIONS)

# Drives JupyterLab in headless Chromium on a copy of notebooks/ (tests/browser/).
test-browser: $(BROWSER_STAMP) ## open, run and save a lesson in JupyterLab in a real browser
	$(PY) -m pytest -q -p no:cacheprovider tests/browser

$(BROWSER_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[browser]'
	touch $@

test: unit notebooks ## unit tests, then every notebook through nbval

unit: $(STAMP) ## unit tests only (gpu-marked ones skip without a GPU)
	$(PY) -m pytest -q tests

# Notebooks may write only to temporary folders: .ci/tree_guard.py fails the run if any
# file under notebooks/ is new, changed or gone, or if the run leaves anything in the
# private TMPDIR it gets.
notebooks: $(STAMP) ## re-execute every notebook and compare its stored outputs
	@if ! ls notebooks/*/*.ipynb >/dev/null 2>&1; then \
	    echo "notebooks/ holds no .ipynb yet: nothing for nbval to run"; exit 0; fi; \
	$(PY) .ci/tree_guard.py notebooks -- $(PY) -m pytest -q $(NBVAL) notebooks

lint: $(STAMP) ## ruff: lint and formatting
	$(PY) -m ruff check .
	$(PY) -m ruff format --check d2l_gpu tests

format: $(STAMP) ## apply ruff's fixes and formatting
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format d2l_gpu tests

sync: $(STAMP) ## render Colab links from pyproject, then pair every .py with its .ipynb
	$(PY) .ci/sync_notebooks.py
	$(PY) -m jupytext --sync $(NOTEBOOK_SOURCES)

execute: $(STAMP) ## refresh the stored outputs of every notebook (seeded, CPU)
	$(PY) .ci/execute_notebooks.py $(NOTEBOOK_SOURCES)

bench: $(STAMP) ## the helpers' costs: try_gpu, Timer, benchmark() against torch's Timer
	$(PY) tests/benchmarks/bench_overhead.py

# No dependency on the venv: a borrowed GPU machine may have torch and nothing else.
gpu-check: ## on a GPU machine: info, gpu tests, nccl demo, notebooks as scripts (< 8 min)
	$(GPU_PYTHON) .ci/gpu_check.py --report $(GPU_REPORT) --wheels $(GPU_WHEELS)

# pytest and its dependencies as pure-Python wheels. pip judges markers by the
# Python it runs on, so the two that Python 3.10 also needs are named outright.
gpu-wheels: $(STAMP) ## download pytest's wheels (build/gpu-wheels) for an offline gpu-check
	rm -rf $(GPU_WHEELS)
	$(PY) -m pip download --quiet --only-binary=:all: --python-version 3.10 -c constraints.txt \
	    --dest $(GPU_WHEELS) pytest exceptiongroup tomli
	@ls $(GPU_WHEELS)
	@! ls $(GPU_WHEELS) | grep -v -- '-none-any\.whl$$' || { echo "not pure Python: above"; exit 1; }

constraints: ## re-pin constraints.txt from a fresh resolve (then review the diff)
	rm -rf $(VENV)-pin && $(PYTHON) -m venv $(VENV)-pin
	$(VENV)-pin/bin/pip install --quiet torch==2.13.0 -e '.[dev,browser]'
	{ sed -n '1,2p' constraints.txt; $(VENV)-pin/bin/pip freeze --exclude-editable \
	    | sed 's/^torch==\([0-9.]*\)+.*/torch==\1/'; } > constraints.new
	mv constraints.new constraints.txt && rm -rf $(VENV)-pin

clean: ## remove the venv and caches
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
