# Setup and entry points. `make serve` and `make test` are the README's two quick-start commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH := torch==2.13.0
# The CPU build of torch (PyPI's Linux x86_64 wheel is the CUDA build: about 20 nvidia-* wheels, several GB).
# When this index cannot be reached, torch comes from pip's configured index instead, with a warning.
# For the CUDA build: make TORCH_INDEX=https://download.pytorch.org/whl/cu130 serve
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: install serve test lint typecheck format bench docker-check gpu-bench

# torch first, from TORCH_INDEX; each extra then installs the project into the same venv.
$(VENV)/.torch:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --retries 1 --timeout 30 --index-url $(TORCH_INDEX) $(TORCH) || { \
	  echo "make: $(TORCH_INDEX) unreachable: $(TORCH) from pip's configured index (on PyPI, Linux x86_64: the CUDA build)" >&2; \
	  $(PY) -m pip install -q $(TORCH); }
	touch $@

$(VENV)/.installed-%: pyproject.toml $(VENV)/.torch
	$(PY) -m pip install -q -e '.[$*]'
	touch $@

# Everything for development: the test suite and the benchmarks' peers.
install: $(VENV)/.installed-test $(VENV)/.installed-bench

serve: $(VENV)/.installed-server
	$(PY) -m ik_layer.server

# One torch thread per process: the suite runs servers and solvers side by side on small machines.
test: $(VENV)/.installed-test
	OMP_NUM_THREADS=1 $(PY) -m pytest -q

# ruff (configured in pyproject.toml): lint and formatting; CI fails on either.
lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy (configured in pyproject.toml). Why the link tree: the project's layout keeps server/, robots/ and deploy/
# at the repository's top level, and setuptools' package-dir mapping installs them as ik_layer.server, ...; mypy
# cannot follow that mapping (it would check server/ as a package of its own and miss its ik_layer.server imports),
# so it checks build/typecheck/ik_layer, symbolic links that lay the package out as it is installed.
typecheck: $(VENV)/.installed-test
	rm -rf build/typecheck && mkdir -p build/typecheck/ik_layer
	for f in ik_layer/*; do ln -s "$(CURDIR)/$$f" build/typecheck/ik_layer/; done
	for d in server robots deploy; do ln -sfn "$(CURDIR)/$$d" build/typecheck/ik_layer/$$d; done
	$(VENV)/bin/mypy

format: $(VENV)/.installed-test
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: $(VENV)/.installed-bench
	$(PY) bench/report.py

# The Dockerfile's install step on the CPU, plus hadolint and a serve/health/IK round trip (CI runs it).
docker-check:
	TORCH_INDEX_URL= bash docker/check.sh

gpu-bench:
	bash bench/gpu.sh
