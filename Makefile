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

.PHONY: run test venv java etcd iproute2 chromium lint bench-compare clean protos

run: $(STAMP)
	@echo "The skiff command is in $(VENV)/bin: in another shell, run '. $(VENV)/bin/activate' to use it."
	$(VENV)/bin/skiff up

test: $(STAMP) $(CPP_STAMP) $(RMQ5_STAMP) java etcd iproute2 chromium
	$(VENV)/bin/lint-imports
	SKIFF_CPP_PYTHON=$(abspath $(CPP_VENV))/bin/python SKIFF_RMQ5_PYTHON=$(abspath $(RMQ5_VENV))/bin/python \
		$(PY) -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS)
	SKIFF_NO_EXTENSIONS=1 $(PY) -m pytest -n 2 -q $(KERNEL_SUITES)

# The unit suites of the modules with compiled kernels (skiff.common.kernels), run again
# on the pure-Python references: CI exercises the fallback as well.
KERNEL_SUITES := tests/unit/common tests/unit/store/test_commitlog.py tests/unit/store/test_index.py \
	tests/unit/store/test_recovery.py tests/unit/protocol/test_message_codec.py

venv: $(STAMP)

# setup.py builds the optional compiled kernels in place (an editable install runs
# build_ext --inplace); a change to their source re-runs it.
$(STAMP): pyproject.toml setup.py skiff/common/_kernels.pyx
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[spark,dev,bench,ha]'
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

# etcd for controller mode (docs/replication.md) and its tests.
etcd:
	@command -v etcd >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq etcd-server; }

# `ip` (network namespaces, veth pairs) for the partition test (tests/integration/test_ha_partition.py;
# it also needs root, and skips saying so without).
iproute2:
	@command -v ip >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq iproute2; }

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
