# Setup and entry points. `make serve` and `make test` are the README's two quick-start commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_CPU := torch==2.13.0

.PHONY: install serve test lint format bench docker-check gpu-bench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_CPU)
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

install: $(VENV)/.installed

serve: install
	$(PY) -m ik_layer.server

# One torch thread per process: the suite runs servers and solvers side by side on small machines.
test: install
	OMP_NUM_THREADS=1 $(PY) -m pytest -q

# ruff (configured in pyproject.toml): lint and formatting; CI fails on either.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: install
	$(PY) bench/report.py

# The Dockerfile's install step on the CPU, plus hadolint and a serve/health/IK round trip (CI runs it).
docker-check:
	TORCH_INDEX_URL= bash docker/check.sh

gpu-bench:
	bash bench/gpu.sh
