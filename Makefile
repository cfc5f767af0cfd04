# The two commands of the quick start: `make demo` and `make test`. Both create .venv with
# python3 -m venv when it is missing, install the project with its test extras and fill
# the kernel cache first (so a first demo loads its kernels instead of compiling them).
# The cache is where every command finds it without help: $NUMBA_CACHE_DIR when set,
# else ~/.cache/arena/numba (shared/jitcache.py), so nothing is set here.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.arena-installed

.PHONY: demo test test-fast test-cuda lint bench clean warm image golden

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,cuda,bench]'
	touch $(STAMP)

# Not a file: runs every time, and takes a fraction of a second once the cache is warm
# (a source edit of a kernel makes it compile that again).
warm: $(STAMP)
	$(BIN)/arena-server --warm-cache

demo: warm
	$(BIN)/arena-demo

# Every test, in three pytest runs:
# - the in-process tests (no node to wait for) on two workers (pytest-xdist), one a core;
# - the rest one at a time: integration, deploy and bench tests start nodes and wait for
#   them, and a second worker beside them would only make their waits longer;
# - the CUDA kernels in numba's simulator, which must be switched on before numba is
#   imported and so needs a run of its own.
IN_PROCESS_TESTS := tests/server tests/shared tests/client_sim tests/launch
test: warm lint
	$(BIN)/python -m pytest -n 2 $(IN_PROCESS_TESTS) --durations=10
	$(BIN)/python -m pytest tests --ignore=tests/cuda $(IN_PROCESS_TESTS:%=--ignore=%) --durations=15
	NUMBA_ENABLE_CUDASIM=1 $(BIN)/python -m pytest tests/cuda

test-fast: $(STAMP)
	$(BIN)/python -m pytest tests --ignore=tests/cuda --ignore=tests/integration

lint: $(STAMP)
	$(BIN)/ruff check server client_sim shared launch tests bench
	$(BIN)/mypy server shared client_sim launch
	$(BIN)/lint-imports

# Each bench overwrites its bench/results/<bench>.json; then docs/performance.md and the
# README's figures are made again from every results file. Name others to run them too:
# make bench BENCHES="server_load hitreg peers/run fairness".
BENCHES ?= server_load hitreg
bench: $(STAMP)
	for name in $(BENCHES); do $(BIN)/python bench/$$name.py || exit 1; done
	$(BIN)/python bench/report.py

# Record the golden matches again (tests/data/golden: real nodes and bots, a few seconds
# each), after a change meant to alter the simulation or the verdicts.
golden: warm
	$(BIN)/python -m tests.golden.record

# The node's container image, arena:latest (deploy/Containerfile), with podman or else
# docker; the base is made locally (debootstrap) when missing: no registry needed.
image:
	deploy/image/build.sh node

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache demo-report.json demo-report.html demo-report/
