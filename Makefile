# d2l-gpu: the commands a newcomer types and CI runs (CONTRIBUTING.md says more).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LESSONS ?= $(wildcard notebooks/en/[0-9]*.py notebooks/zh/[0-9]*.py)
# nbval, as `make test` runs it (the one place its options live): three lessons or test files
# at a time (one often waits on a kernel or a child), each lesson's cells in order in one kernel.
NBVAL := --nbval --nbval-current-env --nbval-cell-timeout=60 -n 3 --dist loadscope \
         --nbval-sanitize-with tests/nbval-sanitize.cfg -p no:cacheprovider
# What `make lab` serves, and extra `jupyter lab` options (e.g. --no-browser).
LAB_ROOT ?= notebooks
LAB_OPTIONS ?=
# gpu-check needs a Python whose torch sees the GPU: the venv's when there is one.
GPU_PYTHON ?= $(if $(wildcard $(PY)),$(PY),$(PYTHON))
GPU_REPORT ?= build/gpu-check
# pip would byte-compile all 8,800 installed modules (30 s); Python compiles the 3,800 a run
# imports on first use and keeps them, here even where the environment says not to.
unexport PYTHONDONTWRITEBYTECODE
PIP_INSTALL := $(PY) -m pip install --quiet --no-compile -c constraints.txt -e

.DEFAULT_GOAL := help
.PHONY: help install lab test unit lint format sync execute gpu-check gpu-publish \
        test-browser site constraints clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PIP_INSTALL) '.[dev]'
	touch $@

install: $(STAMP) ## create or refresh .venv with the pinned versions (constraints.txt)

# JupyterLab as jupyter-config/ sets it (a .py opens as a notebook, no news): 127.0.0.1 only,
# Jupyter's own token, notebooks/ only. Its 'notebooks' extra is installed on first use.
lab: $(STAMP) ## open the lessons in JupyterLab, the index first
	$(PY) -c 'import jupyterlab' 2>/dev/null || \
	    $(PIP_INSTALL) '.[notebooks]'
	JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter-config" $(VENV)/bin/jupyter lab \
	    --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=$(LAB_ROOT) \
	    --LabApp.default_url=/lab/tree/README.md \
	    $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_OPTIONS)

# One OpenMP thread per kernel: 2-thread kernels on 2 cores spin (07: 1 s became 114 s).
# The unit tests and the lessons in one run, so that neither waits for the other's last file.
test: $(STAMP) ## unit tests and every lesson through nbval, three at a time
	OMP_NUM_THREADS=1 $(PY) -m pytest -q $(NBVAL) tests notebooks --ignore=notebooks/gpu

unit: $(STAMP) ## unit tests only (gpu-marked ones skip without a GPU), two at a time
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist worksteal tests

lint: $(STAMP) ## ruff: lint and formatting; the workflows against GitHub's schema
	$(PY) -m ruff check .
	$(PY) -m ruff format --check d2l_gpu tests tools
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml

format: $(STAMP) ## apply ruff's fixes and formatting
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format d2l_gpu tests tools

sync: $(STAMP) ## pair every lesson's .py with its .ipynb (Jupytext)
	$(PY) -m jupytext --sync $(LESSONS)

execute: $(STAMP) ## refresh the stored outputs (LESSONS=notebooks/en/03-....py for one)
	$(PY) tools/execute.py $(LESSONS)

# No dependency on the venv: a GPU machine may have torch and the carried wheels only.
gpu-check: ## on a GPU machine: GPU tests, the nccl demo, every lesson executed (GPU_REPORT)
	$(GPU_PYTHON) tools/gpu_check.py --report $(GPU_REPORT)

gpu-publish: $(STAMP) ## publish a gpu-check report in notebooks/gpu/ and its README.md
	$(PY) tools/publish_gpu.py $(GPU_REPORT)

test-browser: $(STAMP) ## headless Chromium: a lesson run and saved in JupyterLab; the site read
	$(PY) -c 'import playwright, axe_playwright_python, jupyterlab, $(SITE_MODULES)' 2>/dev/null || \
	    $(PIP_INSTALL) '.[browser,notebooks,site]'
	$(PY) -m pytest -q -p no:cacheprovider tests/browser

# The lessons as a website, from their stored outputs (site/build.py; the packages of the
# 'site' extra are installed on first use). SITE_NOTEBOOKS=... builds from another copy.
SITE_NOTEBOOKS ?= notebooks
SITE_MODULES := sphinx, myst_nb, sphinx_book_theme, sphinx_copybutton, jieba
site: $(STAMP) ## build the lessons as a website in build/site/ (English and Chinese)
	$(PY) -c 'import $(SITE_MODULES)' 2>/dev/null || \
	    $(PIP_INSTALL) '.[site]'
	$(PY) site/build.py "$(SITE_NOTEBOOKS)"

constraints: ## re-pin constraints.txt from a fresh resolve (then review the diff)
	rm -rf $(VENV)-pin && $(PYTHON) -m venv $(VENV)-pin
	$(VENV)-pin/bin/pip install --quiet torch==2.13.0 -e '.[dev,notebooks,browser,site]'
	{ sed -n '1,2p' constraints.txt; $(VENV)-pin/bin/pip freeze --exclude-editable \
	    | sed 's/^torch==\([0-9.]*\)+.*/torch==\1/'; } > constraints.new
	mv constraints.new constraints.txt && rm -rf $(VENV)-pin

clean: ## remove the venv, build outputs and caches
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
