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
# Seconds for the whole gpu-check: one 8-minute command on a borrowed GPU machine,
# with room to spare; a slow or shared CPU machine may need more.
GPU_BUDGET ?= 460
NBVAL := --nbval --nbval-current-env --nbval-cell-timeout=60 \
         --nbval-sanitize-with tests/nbval-sanitize.cfg -p no:cacheprovider

.DEFAULT_GOAL := help
.PHONY: help install lab test-browser test unit notebooks lint format sync execute bench \
        verdicts gpu-check gpu-wheels gpu-publish constraints clean

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
# private TMPDIR it gets. notebooks/gpu/ holds what a GPU printed (make gpu-publish):
# a CPU run would not match it, so nbval leaves it out.
notebooks: $(STAMP) ## re-execute every notebook and compare its stored outputs
	@if ! ls notebooks/*/*.ipynb >/dev/null 2>&1; then \
	    echo "notebooks/ holds no .ipynb yet: nothing for nbval to run"; exit 0; fi; \
	$(PY) .ci/tree_guard.py notebooks -- $(PY) -m pytest -q $(NBVAL) --ignore=notebooks/gpu notebooks

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
	$(PY) tools/execute.py $(NOTEBOOK_SOURCES)

# Two runs of every lesson as a script (about twice `make execute`): the outcome of each
# compare() verdict must not change between them. Run it on a quiet machine.
verdicts: $(STAMP) ## run every lesson twice; fail where a compare() verdict changes
	$(PY) .ci/verdicts.py $(NOTEBOOK_SOURCES)

bench: $(STAMP) ## the helpers' costs: try_gpu, Timer, benchmark() against torch's Timer
	$(PY) tests/benchmarks/bench_overhead.py

# No dependency on the venv: a borrowed GPU machine may have torch and nothing else.
gpu-check: ## on a GPU machine: every lesson against its stored outputs, GPU tests, figures (< 8 min)
	$(GPU_PYTHON) .ci/gpu_check.py --report $(GPU_REPORT) --wheels $(GPU_WHEELS) \
	    --budget $(GPU_BUDGET)

# Back from the GPU machine with its report: the lessons as executed there go to
# notebooks/gpu/<machine>/ with a manifest, and the links to them are rendered (README,
# notebooks/README.md, each lesson's title cell). Standard library only.
gpu-publish: ## publish a gpu-check report's lessons in notebooks/gpu/ (GPU_REPORT), links rendered
	$(GPU_PYTHON) .ci/publish_gpu_outputs.py --report $(GPU_REPORT)

# The wheels a torch-only GPU box lacks, for its Python (GPU_PYTHON_VERSION) on
# manylinux x86_64, in sets: science (what the lessons import), tests (pytest), notebook
# (nbval and the Jupyter kernel it drives). A box that has some already needs fewer:
# `make gpu-wheels GPU_WHEELS_SETS=notebook`. gpu-check installs only what its Python
# lacks. pip judges markers by the Python it runs on, so 3.10's backports are named
# outright, and the pins (resolved on 3.11) are left to pip there.
GPU_PYTHON_VERSION ?= 3.12
GPU_WHEELS_SETS ?= science tests notebook
GPU_SET_science := numpy matplotlib
GPU_SET_tests := pytest
GPU_SET_notebook := nbval ipykernel
GPU_WHEELS_EXTRA := $(if $(filter 3.10,$(GPU_PYTHON_VERSION)),exceptiongroup tomli)
GPU_WHEELS_PINS := $(if $(filter 3.10,$(GPU_PYTHON_VERSION)),,-c constraints.txt)
gpu-wheels: $(STAMP) ## download the wheels a torch-only GPU box lacks (build/gpu-wheels)
	$(if $(filter-out science tests notebook,$(GPU_WHEELS_SETS)),$(error GPU_WHEELS_SETS: \
	    unknown set(s) $(filter-out science tests notebook,$(GPU_WHEELS_SETS)); choose from: \
	    science tests notebook))
	rm -rf $(GPU_WHEELS)
	$(PY) -m pip download --quiet --only-binary=:all: --python-version $(GPU_PYTHON_VERSION) \
	    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
	    --platform manylinux_2_17_x86_64 --platform linux_x86_64 $(GPU_WHEELS_PINS) \
	    --dest $(GPU_WHEELS) $(foreach set,$(GPU_WHEELS_SETS),$(GPU_SET_$(set))) $(GPU_WHEELS_EXTRA)
	@ls $(GPU_WHEELS)
	@du -sh $(GPU_WHEELS) | sed 's/\t.*/ in all, for Python $(GPU_PYTHON_VERSION) ($(GPU_WHEELS_SETS))/'

constraints: ## re-pin constraints.txt from a fresh resolve (then review the diff)
	rm -rf $(VENV)-pin && $(PYTHON) -m venv $(VENV)-pin
	$(VENV)-pin/bin/pip install --quiet torch==2.13.0 -e '.[dev,browser]'
	{ sed -n '1,2p' constraints.txt; $(VENV)-pin/bin/pip freeze --exclude-editable \
	    | sed 's/^torch==\([0-9.]*\)+.*/torch==\1/'; } > constraints.new
	mv constraints.new constraints.txt && rm -rf $(VENV)-pin

clean: ## remove the venv and caches
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
