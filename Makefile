# runoff: `make demo` and `make test` are the two commands a newcomer needs.
SHELL := /bin/bash
UV ?= $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
RUN := $(UV) run --frozen

.PHONY: install jars demo test test-unit lint typecheck pytest bench soak airflow check-java browser postgres clean

# Bootstrap uv when it is missing (PyPI only), then install the locked environment (with the
# `postgres` extra: the driver of Airflow's Postgres metadata database). Bytecode is
# compiled at install time: every Spark Python worker imports pyspark, pyarrow and deltalake.
# Then the Data Docs assets (quality/vendor/package-lock.json, from the npm registry) with npm,
# installed from Debian's packages when missing; `npm ci` reruns only when the lockfile changes.
# Last, the class archive every Spark driver starts from (jobs/spark.py, CLASS_ARCHIVE), made
# again when the jars or the locked environment change.
install: check-java jars
	@command -v $(UV) >/dev/null 2>&1 || python3 -m pip install --quiet --user uv
	$(UV) sync --frozen --extra postgres --compile-bytecode
	@command -v npm >/dev/null 2>&1 || { \
	  [ "$$(id -u)" = 0 ] && SUDO= || SUDO=sudo; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq npm >/dev/null; }
	@[ quality/vendor/node_modules/.package-lock.json -nt quality/vendor/package-lock.json ] || \
	  (cd quality/vendor && npm ci)
	@[ jvm/jars/driver.jsa -nt uv.lock ] && [ jvm/jars/driver.jsa -nt jvm/jars/.fetched ] || \
	  { echo "runoff: archiving the Spark driver's classes (jvm/jars/driver.jsa)"; $(RUN) python -m jobs.spark; }

# The JVM jars (jvm/pom.xml) from Maven Central: delta-spark's into jvm/jars/, the s3a://
# filesystem's into jvm/jars/s3/; runs need no network after.
jars: jvm/jars/.fetched
jvm/jars/.fetched: jvm/pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "runoff: Maven is required to fetch delta-spark's jars: install it, e.g. 'apt-get install maven'" >&2; exit 1; }
	rm -rf jvm/jars
	mvn -q -B -f jvm/pom.xml dependency:copy-dependencies@delta dependency:copy-dependencies@s3
	touch $@

check-java:
	@command -v java >/dev/null 2>&1 || { echo "runoff: Java 17+ is required (Spark runs on the JVM): install a Java 17 runtime, e.g. 'apt-get install openjdk-17-jre-headless'" >&2; exit 1; }
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	  [ -n "$$v" ] && [ "$$v" -ge 17 ] || { echo "runoff: Java 17+ is required, found '$$(java -version 2>&1 | head -1)'" >&2; exit 1; }

demo: install
	$(RUN) runoff demo

lint: install
	$(RUN) ruff check .
	$(RUN) ruff format --check .

typecheck: install
	$(RUN) mypy

# Headless Chromium screenshots the report, Data Docs and the Airflow UI in the browser tests.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  [ "$$(id -u)" = 0 ] && SUDO= || SUDO=sudo; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

# PostgreSQL from Debian's packages: the Airflow-on-Postgres test starts its own server with it.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  [ "$$(id -u)" = 0 ] && SUDO= || SUDO=sudo; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq postgresql >/dev/null; }

# Two workers (pytest-xdist), a test file per worker at a time: each worker has its own
# SparkSession, and a file's module fixtures (a runoff server, an Airflow) stay on one worker.
# Files are handed out in collection order, the longest first (tests/conftest.py), not by
# their number of tests (xdist's default would start the long one-test files last).
pytest: install browser postgres
	$(RUN) pytest -n 2 --dist loadfile --no-loadscope-reorder

test: lint typecheck pytest

# The unit tier alone (tests/unit: no JVM, no child process; tests/unit/conftest.py refuses
# both), for the inner loop. `uv run` installs the locked environment when it is missing.
test-unit:
	$(RUN) pytest tests/unit -q

bench: install
	$(RUN) python -m benchmarks

soak: install
	RUNOFF_SOAK_RUNS=50 $(RUN) pytest tests/e2e/test_bronze_crash.py

airflow: install
	$(RUN) python -m dags.standalone

clean:
	rm -rf jvm/jars quality/vendor/node_modules .runoff .pytest_cache .mypy_cache .ruff_cache
