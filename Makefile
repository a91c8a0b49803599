# pylog: `make demo` runs the demo end to end, `make test` runs the tests, `make bench` the benchmarks.
# Each installs what it needs on first use: a venv with the Python packages, and Debian packages.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
# chromium and chromium-driver: the console's browser tests (tests/e2e/test_console_browser.py)
APT_PACKAGES := kcat zookeeper default-jre-headless iproute2 chromium chromium-driver
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export PATH := $(HOME)/.cargo/bin:$(PATH)
NATIVE_SOURCES := native/Cargo.toml native/pyproject.toml $(wildcard native/src/*.rs)
# four test processes (pytest-xdist): most cases wait on brokers, JVMs and timeouts (a whole run used 0.6-0.7 of
# the 2 cores on average with two processes). Whole files go to one process (loadfile), so each module's broker
# and Spark set-up is paid once, handed out in collection order (--no-loadscope-reorder: tests/conftest.py puts the
# longest files first) rather than by their number of tests, which left the longest files to start last
# (bench/RESULTS.md: make test's runs).
PYTEST_ARGS ?= -n 4 --dist loadfile --no-loadscope-reorder

.PHONY: demo test check bench install clean unit typecheck fuzz minio minio-background

install: $(STAMPS)/venv $(STAMPS)/apt $(STAMPS)/native

$(STAMPS)/venv: pyproject.toml
	@mkdir -p $(STAMPS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "make: installing the Python packages into $(VENV) (pyspark is large: 1-3 minutes the first time)"
	@$(PY) -m pip uninstall -q -y pylog 2>/dev/null || true   # the distribution's name before pylog-stream
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev,bench]' --config-settings editable_mode=compat
	@touch $@

# What is built from pinned inputs is kept per user as well (like Maven's ~/.m2), keyed by those inputs, so another
# checkout or a CI run on the same machine reuses it: MinIO by its version, the native decoder's wheel by a hash of
# its sources, its lock file, the Rust compiler and the Python. Deleting the folder only costs the builds again.
USER_CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pylog

# the native record batch decoder (Rust, PyO3), built by maturin from crates.io sources into a wheel
$(STAMPS)/native: $(NATIVE_SOURCES) native/Cargo.lock $(STAMPS)/venv
	@key=$$( (cat $(NATIVE_SOURCES) native/Cargo.lock; rustc -V; $(PY) -V) | sha256sum | cut -c1-16); \
	wheels=$(USER_CACHE)/native-$$key; \
	if ! ls $$wheels/*.whl >/dev/null 2>&1; then \
		echo "make: building the native decoder (Rust, from crates.io sources: about 2 minutes the first time)"; \
		mkdir -p $(USER_CACHE) && tmp=$$(mktemp -d $(USER_CACHE)/native-build.XXXXXX) && \
		$(PY) -m pip wheel -q --disable-pip-version-check --no-deps -w $$tmp ./native && \
		{ mv -T $$tmp $$wheels 2>/dev/null || rm -rf $$tmp; }; \
	fi; \
	$(PY) -m pip install -q --disable-pip-version-check --force-reinstall --no-deps $$wheels/*.whl
	@touch $@

# Spark's own Kafka connector (benchmark peer): jars from Maven Central into an ignored cache
JARS := .cache/jars
$(STAMPS)/jars-spark-kafka: jvm/spark-kafka.xml
	@mkdir -p $(STAMPS)
	mvn -q -f jvm/spark-kafka.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(JARS)/spark-kafka -DincludeScope=runtime
	@touch $@

# delta-spark, Spark's own Delta engine (maintenance, interoperability tests): jars from Maven Central into the
# same cache, minus what Spark ships (jvm/delta-spark.xml); jobs/spark_session.py's with_delta_spark uses them
# after Kafka's jars: two Maven runs at once could both write the same artifact into the local repository
$(STAMPS)/jars-delta-spark: jvm/delta-spark.xml $(STAMPS)/jars-kafka-broker
	@mkdir -p $(STAMPS)
	rm -rf $(JARS)/delta-spark
	@echo "make: fetching delta-spark's jars from Maven Central (under a minute)"
	mvn -q -f jvm/delta-spark.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(JARS)/delta-spark -DincludeScope=runtime
	@touch $@

# Spark's S3 file system (S3A, jvm/hadoop-aws.xml) for delta-spark on s3:// tables, and pylog's conditional-write
# log store for it compiled against those jars into the same folder (jobs/spark_session.py); after delta-spark's
# jars for the same reason as they follow Kafka's
LOGSTORE_SOURCES := $(wildcard jvm/src/pylog/delta/*.java)
$(STAMPS)/jars-hadoop-aws: jvm/hadoop-aws.xml $(LOGSTORE_SOURCES) $(STAMPS)/jars-delta-spark $(STAMPS)/venv
	@mkdir -p $(STAMPS)
	rm -rf $(JARS)/hadoop-aws
	@echo "make: fetching hadoop-aws and the AWS SDK bundle from Maven Central (690 MB, once per machine)"
	mvn -q -f jvm/hadoop-aws.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(JARS)/hadoop-aws -DincludeScope=runtime
	@tmp=$$(mktemp -d) && sparkjars=$$($(PY) -c 'import pyspark, os; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))') && \
		javac -nowarn -encoding UTF-8 -d $$tmp -cp "$$sparkjars/*:$(JARS)/delta-spark/*:$(JARS)/hadoop-aws/*" $(LOGSTORE_SOURCES) && \
		jar cf $(JARS)/hadoop-aws/pylog-delta-logstore.jar -C $$tmp . && rm -rf $$tmp
	@touch $@

# Apache Kafka's broker (test peer): jars from Maven Central into the same cache
$(STAMPS)/jars-kafka-broker: jvm/kafka-broker.xml
	@mkdir -p $(STAMPS)
	@echo "make: fetching Apache Kafka's jars from Maven Central (the tests' reference broker; under a minute)"
	mvn -q -f jvm/kafka-broker.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(JARS)/kafka-broker -DincludeScope=runtime
	@touch $@

$(STAMPS)/apt:
	@mkdir -p $(STAMPS)
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get -o DPkg::Lock::Timeout=600 update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get \
			-o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $$missing; \
	fi
	@touch $@

# the Spark driver's classes in a JDK class-data archive (jobs/class_archive.py): each job's JVM then starts on
# about a third less CPU; made once (about 30 s), from a short Spark run
$(STAMPS)/spark-classes: $(STAMPS)/venv jobs/class_archive.py
	@mkdir -p $(STAMPS)
	@echo "make: archiving the Spark driver's classes (about 30 s, once)"
	$(PY) -m jobs.class_archive
	@touch $@

# MinIO, a real S3 server (object-storage tests, docs/OBJECT_STORAGE.md), built from the Go module proxy into the
# per-user cache above and linked from .cache/minio: about 1.8 minutes of both cores the first time on a machine.
# Pinned: `@latest` moves. Built without the compiler's optimisations and debug symbols (-N -l, -s -w): 196 s of CPU instead of 245 s (bench/RESULTS.md), and
# the tests need its behaviour, not its speed.
MINIO_VERSION := v0.0.0-20260212201848-7aac2a2c5b7c
MINIO_DIR := .cache/minio
MINIO_BUILT := $(USER_CACHE)/minio-$(MINIO_VERSION)/minio
$(STAMPS)/minio:
	@mkdir -p $(STAMPS) $(MINIO_DIR)/bin $(USER_CACHE)
	@if [ ! -x $(MINIO_BUILT) ]; then \
		echo "make: building MinIO from the Go module proxy (about 2.5 minutes, once per machine)"; \
		tmp=$$(mktemp -d $(USER_CACHE)/minio-build.XXXXXX) && \
		GOPATH=$$tmp/gopath GOCACHE=$$tmp/gocache GOBIN=$$tmp/bin GOFLAGS=-modcacherw GOTOOLCHAIN=local \
			go install -trimpath -gcflags="all=-N -l" -ldflags="-s -w" github.com/minio/minio@$(MINIO_VERSION) && \
		mkdir -p $(dir $(MINIO_BUILT)) && mv $$tmp/bin/minio $(MINIO_BUILT); \
		rc=$$?; rm -rf $$tmp; exit $$rc; \
	fi
	ln -sfn $(MINIO_BUILT) $(MINIO_DIR)/bin/minio
	@touch $@

minio: $(STAMPS)/minio

# `make test` starts the MinIO build in the background first, beside the set-up's downloads and the suite's first
# (longest) files; the tests that need MinIO are scheduled after those (marker object_store, tests/conftest.py) and
# wait for the build (pylog.launch.object_store.wait_for_build). Not niced: under the suite's load a niced build
# took 19 minutes.
minio-background:
	@if [ ! -f $(STAMPS)/minio ]; then mkdir -p $(MINIO_DIR); \
		echo "make: building MinIO in the background (log: $(MINIO_DIR)/build.log)"; \
		rm -f $(MINIO_DIR)/build.rc; ($(MAKE) -s $(STAMPS)/minio > $(MINIO_DIR)/build.log 2>&1; echo $$? > $(MINIO_DIR)/build.rc) & \
	fi

# after the install, the type check, the Maven jars and the class archive side by side (they need only the venv)
test: minio-background install
	@$(MAKE) --no-print-directory -j3 typecheck $(STAMPS)/jars-hadoop-aws $(STAMPS)/spark-classes
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

typecheck: $(STAMPS)/venv
	$(PY) -m mypy

unit: $(STAMPS)/venv $(STAMPS)/native
	$(PY) -m pytest -q -p no:cacheprovider -n 2 tests/unit

# the fast tier, for every change (well under 2 minutes): types, the layer table, and the unit tests
check: typecheck unit

demo: install $(STAMPS)/spark-classes
	$(PY) -m pylog.demo

bench: install $(STAMPS)/jars-spark-kafka
	$(PY) bench/broker_throughput.py
	$(PY) bench/spark_read.py

# every fuzzing harness (fuzz/README.md) for SECONDS of run time in total, two at a time; logs in /tmp/fuzzruns
SECONDS ?= 600
fuzz: install
	$(PY) -m fuzz.campaign --seconds $(SECONDS)

clean:
	rm -rf $(VENV) $(STAMPS) build *.egg-info native/target
