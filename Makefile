# Setup and entry points. `make demo` and `make test` are the README's two quick-start commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_CPU := torch==2.13.0

.PHONY: install demo serve test bench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_CPU)
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) examples/kinematics_demo.py

serve: install
	$(PY) -m server

test: install
	$(PY) -m pytest -q

bench: install
	$(PY) bench/fk_jacobian.py
