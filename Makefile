# Every target creates .venv on a fresh machine (only Python 3.11+ and make needed).
PYTHON ?= python3
# The interpreter outside .venv (resolved before .venv/bin goes first on the PATH below).
SYSTEM_PYTHON := $(or $(shell command -v $(PYTHON)),$(PYTHON))
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
DOCS_STAMP := $(VENV)/.installed-docs
PIP := $(BIN)/python -m pip --quiet --disable-pip-version-check
# The toolchain lock: every package the dev, docs and demo installs pull in, pinned to the release `make lock`
# saw (the package's own dependencies stay ranges in pyproject.toml; the lock only constrains what is installed
# here). `make test-newest` runs the same check with LOCK empty, on the newest releases.
LOCK ?= requirements-dev.lock
CONSTRAINTS := $(if $(LOCK),-c $(LOCK),--upgrade --upgrade-strategy eager)
# inline-snapshot formats with `ruff` from the PATH.
export PATH := $(CURDIR)/$(BIN):$(PATH)

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-10s %s\n", $$1, $$2}'

$(BIN)/python:
	$(SYSTEM_PYTHON) -m venv $(VENV)

# pip 25.1 is the first to install PEP 735 dependency groups (`--group`).
$(STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	@$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip --default-pip
	$(PIP) install $(CONSTRAINTS) 'pip>=25.1'
	$(PIP) install $(CONSTRAINTS) -e . --group dev
	@touch $(STAMP) $(DEMO_STAMP) $(DOCS_STAMP)

# Only the docs group (mkdocs, Material, mkdocstrings, ruff: some 40 packages, not the 1 GB dev group): the API
# reference is read from the source, so the package and its dependencies are not needed. `make docs` uses it
# unless the dev install is there, or on its way (another goal, such as `make test`, needs it).
$(DOCS_STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	@$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip --default-pip
	$(PIP) install $(CONSTRAINTS) 'pip>=25.1'
	$(PIP) install $(CONSTRAINTS) --group docs
	@touch $(DOCS_STAMP)
DOCS_INSTALL := $(if $(or $(wildcard $(STAMP)),$(filter-out docs,$(MAKECMDGOALS))),$(STAMP),$(DOCS_STAMP))

# Only what the demo needs (examples/requirements.txt: about 30 packages, not the dev toolchain); the demo
# imports the package from this checkout. A fresh .venv gets no pip of its own when the system pip can
# install into it (`pip --python`, pip 22.3+): bootstrapping pip costs more CPU than the demo itself.
$(DEMO_STAMP): examples/requirements.txt $(LOCK)
	@test -x $(BIN)/python || $(SYSTEM_PYTHON) -m venv --without-pip $(VENV)
	@if $(BIN)/python -m pip --version >/dev/null 2>&1; then pip='$(BIN)/python -m pip'; \
	elif $(SYSTEM_PYTHON) -m pip --python $(BIN)/python --version >/dev/null 2>&1; then \
	  pip='$(SYSTEM_PYTHON) -m pip --python $(BIN)/python'; \
	else $(BIN)/python -m ensurepip --default-pip >/dev/null && pip='$(BIN)/python -m pip'; fi; \
	echo "$$pip install -r examples/requirements.txt"; \
	$$pip --quiet --disable-pip-version-check install --no-compile $(CONSTRAINTS) -r examples/requirements.txt
	@touch $(DEMO_STAMP)

.PHONY: install
install: $(STAMP) ## Create .venv and install the package with its dev tools

.PHONY: demo
demo: $(DEMO_STAMP) ## Run the demo on a scripted model (no API key needed; MODEL=... for a real one)
	$(BIN)/python -m examples.demo $(if $(MODEL),--model '$(MODEL)')

.PHONY: format
format: $(STAMP) ## Format the code
	$(BIN)/ruff format
	$(BIN)/ruff check --fix

.PHONY: lint
lint: $(STAMP) ## Lint with ruff
	$(BIN)/ruff format --check
	$(BIN)/ruff check

.PHONY: typecheck
typecheck: $(STAMP) ## Type check with pyright (strict on the package)
	$(BIN)/pyright --pythonpath $(BIN)/python

.PHONY: pytest
pytest: $(STAMP) ## Run the test suite
	$(BIN)/pytest -q $(PYTEST_ARGS)

.PHONY: docs
docs: $(DOCS_INSTALL) ## Build the docs site (site/index.html opens from disk) with mkdocs --strict
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

.PHONY: test
test: lint typecheck pytest docs ## The whole check: lint, type check, tests, docs build

# The same check on the newest release of every dependency and tool, in a venv of its own: a breaking release is
# seen here before a user meets it. Its venv is upgraded on every call.
NEWEST_VENV := .venv-newest

.PHONY: test-newest
test-newest: ## The whole check against the newest releases (no lock), in .venv-newest
	rm -f $(NEWEST_VENV)/.installed*
	$(MAKE) test VENV=$(NEWEST_VENV) LOCK=

# A new lock: the dev group, the docs group and the demo's requirements resolved afresh in a throwaway venv, then
# frozen. Run on purpose (a release to take, a new dependency), then `make test`, and commit the lock with the fix.
LOCK_VENV := .venv-lock

.PHONY: lock
lock: ## Refresh requirements-dev.lock from the newest releases
	rm -rf $(LOCK_VENV)
	$(SYSTEM_PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade 'pip>=25.1'
	$(LOCK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e . --group dev -r examples/requirements.txt
	{ echo '# The toolchain lock (pip constraints): what `make install`, `make docs` and `make demo` install.'; \
	  echo '# Made by `make lock` on $(shell date -u +%Y-%m-%d) with Python $(shell $(SYSTEM_PYTHON) -c "import sys; print(sys.version.split()[0])"); refreshed on purpose, never by hand.'; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable | grep -v -e '^setuptools==' -e '^wheel=='; } > $(LOCK)
	rm -rf $(LOCK_VENV)

# Some sections only: `make bench BENCH_SECTIONS='hotpath store'`. The hot-path section measures the package as a
# user installs it: it builds bench/.out/venv-plain (`pip install .`, no extras), venv-pure (its pure fallback) and upstream's venv.
BENCH_SECTIONS ?=

.PHONY: bench
bench: $(STAMP) ## Run the benchmark suite (hot path on a plain `pip install .`) and write docs/benchmarks.md
	$(BIN)/python -m bench $(BENCH_SECTIONS)

# The sdist and the wheel, as a release would upload them, checked: the wheel's metadata and files, the sdist's
# sources, and the wheel installed into a fresh venv (its dependencies from PyPI, through the lock) and imported.
.PHONY: dist
dist: $(STAMP) ## Build the sdist and wheel into dist/ and check them (metadata, files, a fresh-venv install and import)
	rm -rf dist
	$(BIN)/hatchling build -d dist
	$(BIN)/python -m tests._dist dist

.PHONY: clean
clean: ## Remove build artefacts (keeps .venv)
	rm -rf site .pytest_cache .ruff_cache dist build
