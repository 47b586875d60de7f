# Every target sets up what it needs on a fresh machine: a virtual environment
# under build/, Python packages from PyPI, and a Java runtime for Spark.
PYTHON ?= python3
BUILD := build
VENV := $(BUILD)/venv
PY := $(VENV)/bin/python
CPP_VENV := $(BUILD)/venv-rocketmq-cpp
STAMP := $(VENV)/.installed
CPP_STAMP := $(CPP_VENV)/.installed
RMQ5_VENV := $(BUILD)/venv-rocketmq5
RMQ5_STAMP := $(RMQ5_VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = "0" ] || echo sudo)

.PHONY: run test venv java chromium lint bench-compare clean protos

run: $(STAMP)
	$(VENV)/bin/skiff up

test: $(STAMP) $(CPP_STAMP) $(RMQ5_STAMP) java chromium
	$(VENV)/bin/lint-imports
	SKIFF_CPP_PYTHON=$(abspath $(CPP_VENV))/bin/python SKIFF_RMQ5_PYTHON=$(abspath $(RMQ5_VENV))/bin/python \
		$(PY) -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS)

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

# The official RocketMQ 5.x Python client (gRPC) for tests/interop/test_grpc_client.py: its
# own environment too (it vendors protos that clash with Skiff's generated ones).
$(RMQ5_STAMP):
	$(PYTHON) -m venv $(RMQ5_VENV)
	$(RMQ5_VENV)/bin/python -m pip install --quiet 'rocketmq-python-client==5.1.2'
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

# The RocketMQ 5.x gRPC message classes, generated from the vendored protos
# (proto/, apache/rocketmq-apis) and checked in under skiff/protocol/v5/; the
# imports between them are rewritten to that package. Re-run after updating proto/.
PROTOS := definition service
protos: $(STAMP)
	rm -rf $(BUILD)/protos && mkdir -p $(BUILD)/protos
	$(PY) -m grpc_tools.protoc -Iproto --python_out=$(BUILD)/protos --pyi_out=$(BUILD)/protos \
		$(foreach p,$(PROTOS),proto/apache/rocketmq/v2/$(p).proto)
	for p in $(PROTOS); do for ext in py pyi; do \
		sed 's/^from apache.rocketmq.v2 import/from skiff.protocol.v5 import/' \
			$(BUILD)/protos/apache/rocketmq/v2/$${p}_pb2.$$ext > skiff/protocol/v5/$${p}_pb2.$$ext; done; done

lint: $(STAMP)
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(BUILD)
