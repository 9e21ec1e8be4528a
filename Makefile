# Two commands do all set-up on a fresh machine:
#   make demo   - the main job: simulated slime loop, W&B offline, dashboards written
#   make test   - the linter (ruff), then the test suite (with the docstring examples as doctests)
#   make bench  - the speed targets, a few minutes (installs the `bench` extra)
#   make bench-big - the big-file and 100,000-step checks, many minutes
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: demo test install browser bench bench-big clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Debian's chromium, for the browser test of the offline dashboard (skipped when it cannot be installed).
browser:
	@command -v chromium >/dev/null 2>&1 || echo "installing Debian's chromium (about a minute, once) for the browser test of the HTML dashboard"
	@command -v chromium >/dev/null 2>&1 || (command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || \
	  echo "chromium could not be installed: the browser test will be skipped")

demo: $(STAMP)
	$(BIN)/shopsim-metrics demo --out demo_out

test: $(STAMP) browser
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[dev,bench]'
	touch $(BENCH_STAMP)

# every benchmark runs, then the recipe exits 1 if any missed its target (make itself then exits 2, "Error 1");
# the single-process ones run side by side on the CPUs, those that spread over every CPU alone (benchmarks/run.py)
BENCH_SIDE_BY_SIDE := import filter monitoring_step wave_sizing simulator prompt_history records_file
BENCH_ALONE := prompt_skip skip_worlds real_trace
BENCH_BIG := big_files resume

bench: $(BENCH_STAMP)
	@$(BIN)/python benchmarks/run.py --parallel $(BENCH_SIDE_BY_SIDE) --serial $(BENCH_ALONE)

bench-big: $(BENCH_STAMP)
	@status=0; for b in $(BENCH_BIG); do echo "== benchmarks/bench_$$b.py"; $(BIN)/python benchmarks/bench_$$b.py || status=1; done; exit $$status

clean:
	rm -rf $(VENV) demo_out
