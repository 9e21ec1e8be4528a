# Two commands do all set-up on a fresh machine:
#   make demo   - the main job: simulated slime loop, W&B offline, dashboards written
#   make test   - the test suite (with the docstring examples as doctests)
#   make bench  - the benchmarks (installs the `bench` extra)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: demo test install browser bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Debian's chromium, for the browser test of the offline dashboard (skipped when it cannot be installed).
browser:
	@command -v chromium >/dev/null 2>&1 || (command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || \
	  echo "chromium could not be installed: the browser test will be skipped")

demo: $(STAMP)
	$(BIN)/shopsim-metrics demo --out demo_out

test: $(STAMP) browser
	$(BIN)/python -m pytest -q

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[dev,bench]'
	touch $(BENCH_STAMP)

# every benchmark runs; the exit status is 1 when any of them missed its target
bench: $(BENCH_STAMP)
	status=0; for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || status=1; done; exit $$status

clean:
	rm -rf $(VENV) demo_out
