# Every target sets up what it needs on a fresh machine: a virtual environment
# under build/, Python packages from PyPI, and a Java runtime for Spark.
PYTHON ?= python3
BUILD := build
VENV := $(BUILD)/venv
PY := $(VENV)/bin/python
CPP_VENV := $(BUILD)/venv-rocketmq-cpp
STAMP := $(VENV)/.installed
CPP_STAMP := $(CPP_VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = "0" ] || echo sudo)

.PHONY: run test venv java chromium lint bench-compare clean

run: $(STAMP)
	$(VENV)/bin/skiff up

test: $(STAMP) $(CPP_STAMP) java chromium
	$(VENV)/bin/lint-imports
	SKIFF_CPP_PYTHON=$(abspath $(CPP_VENV))/bin/python $(PY) -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS)

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[spark,dev,bench]'
	touch $@

# The PyPI `rocketmq` 0.4.4 wheel bundles the RocketMQ C++ client; it gets its
# own environment because the 5.x client uses the same top-level module name.
$(CPP_STAMP):
	$(PYTHON) -m venv $(CPP_VENV)
	$(CPP_VENV)/bin/python -m pip install --quiet 'rocketmq==0.4.4'
	touch $@

java:
	@command -v java >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq default-jre-headless; }

# Headless Chromium and its driver from Debian, for the dashboard's browser tests
# (Selenium drives the system chromedriver; nothing is downloaded at run time).
chromium:
	@{ command -v chromium && command -v chromedriver; } >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium chromium-driver; }

# Side-by-side benchmark against RabbitMQ, Redis and NATS (Debian packages),
# not part of `make test`.
bench-compare: $(STAMP)
	$(PY) -m pip install --quiet -e '.[spark,dev,bench]'
	$(PY) bench/compare/run.py $(BENCH_ARGS)

lint: $(STAMP)
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(BUILD)
