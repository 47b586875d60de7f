# Every target sets up what it needs on a fresh machine: a virtual environment
# under build/, Python packages from PyPI at the versions the lock files under
# requirements/ pin (hashes checked), and a Java runtime for Spark.
# `make lock` refreshes the locks from pyproject.toml and requirements/*.in;
# `make test-latest` runs the suite against the newest releases instead.
PYTHON ?= python3
BUILD := build
VENV := $(BUILD)/venv
PY := $(VENV)/bin/python
CPP_VENV := $(BUILD)/venv-rocketmq-cpp
STAMP := $(VENV)/.installed
CPP_STAMP := $(CPP_VENV)/.installed
RMQ5_VENV := $(BUILD)/venv-rocketmq5
RMQ5_STAMP := $(RMQ5_VENV)/.installed
NODE_DIR := $(BUILD)/node-rocketmq5
NODE_STAMP := $(NODE_DIR)/.installed
SUDO := $(shell [ "$$(id -u)" = "0" ] || echo sudo)

EXTRAS := spark,dev,bench,ha,tier,chaos
LATEST := $(BUILD)/latest
LOCK_VENV := $(BUILD)/venv-lock
PIP_COMPILE := CUSTOM_COMPILE_COMMAND='make lock' $(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-find-links --no-emit-index-url

.PHONY: run test test-latest lock venv java etcd iproute2 chromium lint bench-compare clean protos

run: $(STAMP)
	@echo "The skiff command is in $(VENV)/bin: in another shell, run '. $(VENV)/bin/activate' to use it."
	$(VENV)/bin/skiff up

test: $(STAMP) $(CPP_STAMP) $(RMQ5_STAMP) $(NODE_STAMP) java etcd iproute2 chromium
	@$(call suite,$(VENV),$(CPP_VENV),$(RMQ5_VENV))

# The same suite on the newest release of every dependency (and of the test clients'
# dependencies), in venvs of their own under build/latest/: drift is seen here, on
# purpose, before `make lock` takes it in.
test-latest: java etcd iproute2 chromium
	rm -rf $(LATEST) && mkdir -p $(LATEST)
	$(PYTHON) -m venv $(LATEST)/venv
	$(LATEST)/venv/bin/python -m pip install --quiet --upgrade pip
	$(LATEST)/venv/bin/python -m pip install --quiet --upgrade -e '.[$(EXTRAS)]'
	$(PYTHON) -m venv $(LATEST)/venv-rocketmq-cpp
	$(LATEST)/venv-rocketmq-cpp/bin/python -m pip install --quiet --upgrade -r requirements/rocketmq-cpp.in
	$(PYTHON) -m venv $(LATEST)/venv-rocketmq5
	$(LATEST)/venv-rocketmq5/bin/python -m pip install --quiet --upgrade -r requirements/rocketmq5.in
	$(LATEST)/venv/bin/python -m pip freeze --exclude-editable
	@$(call suite,$(LATEST)/venv,$(LATEST)/venv-rocketmq-cpp,$(LATEST)/venv-rocketmq5)

# Both passes run and both are reported, even when the first fails; the target fails
# if either did. $(1): the venv under test; $(2), $(3): the C++ and 5.x client venvs.
suite = contracts=0; types=0; whole=0; kernels=0; \
	$(1)/bin/lint-imports || contracts=$$?; \
	$(1)/bin/mypy || types=$$?; \
	SKIFF_CPP_PYTHON=$(abspath $(2))/bin/python SKIFF_RMQ5_PYTHON=$(abspath $(3))/bin/python \
		$(1)/bin/python -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS) || whole=$$?; \
	SKIFF_NO_EXTENSIONS=1 $(1)/bin/python -m pytest -n 2 -q $(KERNEL_SUITES) || kernels=$$?; \
	echo "make test: import contracts exit $$contracts, mypy exit $$types, whole suite exit $$whole," \
		"kernel suites on pure Python exit $$kernels"; \
	[ $$contracts -eq 0 ] && [ $$types -eq 0 ] && [ $$whole -eq 0 ] && [ $$kernels -eq 0 ]

# The unit suites of the modules with compiled kernels (skiff.common._kernels, skiff.store._kernels,
# skiff.broker._kernels, skiff.columnar._kernels, skiff.protocol._frames, skiff.protocol.kafka._records; chosen by
# skiff.common.kernels), run again on the pure-Python references: CI exercises the fallback as well.
KERNEL_SUITES := tests/unit/common tests/unit/store/test_kernels.py tests/unit/store/test_commitlog.py \
	tests/unit/store/test_index.py tests/unit/store/test_recovery.py tests/unit/protocol/test_message_codec.py \
	tests/unit/protocol/test_frame.py tests/unit/protocol/test_frame_kernels.py tests/unit/protocol/test_headers.py \
	tests/unit/broker/test_send_path_twins.py tests/unit/broker/test_writer_kernels.py tests/unit/columnar \
	tests/unit/tier/test_records_to_table.py tests/unit/tier/test_key_index.py tests/unit/tier/test_rebuild.py \
	tests/unit/protocol/kafka/test_records.py tests/unit/protocol/kafka/test_records_kernel.py \
	tests/unit/broker/test_kafka_fetch_records.py

venv: $(STAMP)

# The locked set first (hashes required), then Skiff itself with no dependencies and
# no build isolation, so its build tools (setuptools, Cython) are the locked ones too.
# setup.py builds the optional compiled kernels in place (an editable install runs
# build_ext --inplace); a change to their source re-runs it.
$(STAMP): requirements/skiff.lock pyproject.toml setup.py skiff/common/_kernels.pyx skiff/common/_kernels.pxd \
		skiff/store/_kernels.pyx skiff/broker/_kernels.pyx skiff/columnar/_kernels.pyx skiff/protocol/_frames.pyx \
		skiff/protocol/kafka/_records.pyx
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r requirements/skiff.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# The PyPI `rocketmq` 0.4.4 wheel bundles the RocketMQ C++ client; it gets its
# own environment because the 5.x client uses the same top-level module name.
$(CPP_STAMP): requirements/rocketmq-cpp.lock
	$(PYTHON) -m venv $(CPP_VENV)
	$(CPP_VENV)/bin/python -m pip install --quiet --require-hashes -r requirements/rocketmq-cpp.lock
	touch $@

# The official RocketMQ 5.x Python client (gRPC) for tests/interop/test_grpc_client.py: its
# own environment too (it vendors protos that clash with Skiff's generated ones).
$(RMQ5_STAMP): requirements/rocketmq5.lock
	$(PYTHON) -m venv $(RMQ5_VENV)
	$(RMQ5_VENV)/bin/python -m pip install --quiet --require-hashes -r requirements/rocketmq5.lock
	touch $@

# Refresh the lock files: the newest releases that pyproject.toml and requirements/*.in
# allow, with the hashes of every file PyPI serves for them (pip-tools' format).
# Run `make test-latest` first to see that they pass.
lock:
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet 'pip-tools==7.6.2'
	$(PIP_COMPILE) --all-build-deps --extra $(EXTRAS) -o requirements/skiff.lock pyproject.toml
	$(PIP_COMPILE) -o requirements/rocketmq-cpp.lock requirements/rocketmq-cpp.in
	$(PIP_COMPILE) -o requirements/rocketmq5.lock requirements/rocketmq5.in

java:
	@command -v java >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq default-jre-headless; }

# etcd for controller mode (docs/replication.md) and its tests.
etcd:
	@command -v etcd >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq etcd-server; }

# `ip` (network namespaces, veth pairs) for the partition test (tests/integration/test_ha_partition.py;
# it also needs root, and skips saying so without).
# The official RocketMQ 5.x Node.js client (npm rocketmq-client-nodejs), for the interop tests
# (tests/interop/test_nodejs_client.py): installed from its lock file, no install scripts run.
$(NODE_STAMP): tests/interop/nodejs/package.json tests/interop/nodejs/package-lock.json
	@command -v npm >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq nodejs npm; }
	mkdir -p $(NODE_DIR)
	cp tests/interop/nodejs/package.json tests/interop/nodejs/package-lock.json $(NODE_DIR)/
	cd $(NODE_DIR) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $@

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
	$(VENV)/bin/skiff bench compare $(BENCH_ARGS)

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
	$(VENV)/bin/mypy

clean:
	rm -rf $(BUILD)
