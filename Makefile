# Odradek's entry points. `make run` and `make test` work from a fresh clone on Debian/Ubuntu with
# only Python 3.11+, make and apt: they create .venv and install what they need.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 9092
DATA   ?= ./data

.PHONY: run test fault lint bench generate check-generated clean venv deps test-deps java-deps docker-deps

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.test-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[test,spark,plot]'
	bash scripts/install-system-deps
	touch $@

venv: $(VENV)/.installed
test-deps: $(VENV)/.test-installed java-deps docker-deps

# Kafka 3.9, Kafka Streams 3.9 and Spark's kafka connector jars into build/java/ (cached; a no-op when current)
java-deps: $(VENV)/.test-installed
	PY=$(PY) bash scripts/install-java-deps

# the `docker compose` v2 plugin for tests/compose (built from the Go module proxy; a no-op when
# current). The Docker engine and the images are the tests' fixtures' work (tests/compose/conftest.py).
docker-deps: $(VENV)/.test-installed
	bash scripts/install-docker-compose

run: $(VENV)/.installed
	$(VENV)/bin/odradek serve --listeners PLAINTEXT://localhost:$(PORT) --log-dirs $(DATA)

test: test-deps
	$(PY) -m pytest -q --durations=25

# the full fault-injection trial counts (make test runs a fast subset of tests/fault)
fault: test-deps
	ODRADEK_FAULT_FULL=1 $(PY) -m pytest -q -s tests/fault tests/sim

lint: $(VENV)/.test-installed
	$(VENV)/bin/ruff check .
	$(PY) -m protocol.generator --check

generate: $(VENV)/.installed
	$(PY) -m protocol.generator

bench: test-deps
	$(PY) -m tests.bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
