.DEFAULT_GOAL := help
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
DATE ?= 2026-11-20
DEMO_DIR ?= build/demo

.PHONY: help setup test test-fast check lint demo clean

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-14s %s\n", $$1, $$2}'

# two stamps: what the job needs (make demo), and that plus the test dependencies (make test, lint, bench)
$(VENV)/.runtime: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e .
	@touch $@

$(VENV)/.test: $(VENV)/.runtime
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

setup: $(VENV)/.test ## create .venv and install the project with its test dependencies

test: setup .venv-airflow/bin/airflow ## run the whole test suite (project venv, then the Airflow venv)
	@$(BIN)/recsys-spark warm-up || echo "warm-up failed: the tests start Spark without the class-data archive"
	$(BIN)/pytest -q
	.venv-airflow/bin/pytest -q tests/airflow

.PHONY: chaos
chaos: setup ## kill the driver at every file operation of the commit, every collect of a day and random moments (long)
	RECSYS_CHAOS=all $(BIN)/pytest -q -m chaos

test-fast: setup ## kernel-only tests (no Spark), seconds
	$(BIN)/pytest -q -m "not spark"

check: setup ## the quick loop after a change: kernels and in-process Spark tests (no metastore, cluster, chaos, subprocess)
	$(BIN)/pytest -q -m "not (process or hive or cluster or chaos)"

lint: setup ## ruff (lint and format check), mypy, the import layers (import-linter), the size limits (.ci/limits.py)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python .ci/limits.py

# Airflow gets its own venv: installed beside pyspark in .venv, the Spark provider
# replaced pyspark 4.3's files with 4.2's without a warning. Pinned; after changing a
# pin, rm -rf .venv-airflow. The Hive provider (HivePartitionSensor, table inputs) and the
# cncf-kubernetes one (SparkKubernetesOperator) serve the example DAGs' sensors and K8s DAG.
.venv-airflow/bin/airflow:
	$(PY) -m venv .venv-airflow
	.venv-airflow/bin/pip install --quiet --upgrade pip
	.venv-airflow/bin/pip install --quiet 'apache-airflow==3.3.2' 'apache-airflow-providers-apache-spark==6.3.4' \
		'apache-airflow-providers-apache-hive==9.7.1' 'apache-airflow-providers-cncf-kubernetes==10.25.0' \
		'pytest>=8' || { rm -f $@; exit 1; }
	@touch $@

# The oldest supported combination (Python 3.10, PySpark 3.5) in its own venv; CI runs it beside
# the project venv (the newest: Python 3.11/3.12, PySpark 4.x). pandas < 2.3 and numpy < 2 are what
# PySpark 3.5 was released against. After changing a pin, rm -rf .venv-spark35.
# pyenv's python3.10 shim answers only where 3.10 is a global version: prefer the interpreter itself
PY310 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.10*/bin/python3.10) python3.10)
COMPAT_SPARK_TESTS ?= tests/runtime/test_compat.py tests/io/test_catalog.py tests/steps/test_label.py tests/daily/test_pipeline.py
.venv-spark35/bin/pytest:
	$(PY310) -m venv .venv-spark35
	.venv-spark35/bin/pip install --quiet --upgrade pip
	.venv-spark35/bin/pip install --quiet 'pyspark>=3.5,<3.6' 'pandas>=2.2,<2.3' 'numpy>=1.23.2,<2' 'pyarrow>=18' \
		'tomli>=2' scipy 'jinja2>=3.1' 'scikit-learn>=1.4' 'statsmodels>=0.14' 'chispa>=0.10' 'pytest>=8' || { rm -f $@; exit 1; }
	@touch $@

# obp's golden values for tests/test_ope*.py (docs/ope.md): Open Bandit Pipeline 0.4.1 imports torch and
# pandas 1.5's API, so it gets a throwaway venv; --check recomputes obp's values and compares them with
# tests/golden/obp_values.json (the tests hold them as literals).  TORCH=/path/to/torch-*.whl for a local wheel.
TORCH ?= torch --index-url https://download.pytorch.org/whl/cpu
build/obpvenv/bin/python:
	$(PY) -m venv build/obpvenv
	build/obpvenv/bin/pip install --quiet $(TORCH) || { rm -rf build/obpvenv; exit 1; }
	build/obpvenv/bin/pip install --quiet --no-deps 'obp==0.4.1'
	build/obpvenv/bin/pip install --quiet 'pandas==1.5.3' 'numpy<2' scikit-learn scipy matplotlib seaborn tqdm pyyaml \
		mypy-extensions || { rm -rf build/obpvenv; exit 1; }

.PHONY: golden-obp
golden-obp: build/obpvenv/bin/python ## recompute obp's golden OPE values and compare them with the recorded ones
	build/obpvenv/bin/python tests/golden/obp_ope.py --check

.PHONY: test-compat
test-compat: .venv-spark35/bin/pytest ## fast tests + a Spark subset on Python 3.10 / PySpark 3.5
	PYTHONPATH=$(CURDIR) .venv-spark35/bin/pytest -q -p no:cacheprovider -m "not spark"
	PYTHONPATH=$(CURDIR) .venv-spark35/bin/pytest -q -p no:cacheprovider -m "spark and not cluster and not hive" $(COMPAT_SPARK_TESTS)

.PHONY: test-airflow
test-airflow: .venv-airflow/bin/airflow ## run the Airflow DAG test in its own venv
	.venv-airflow/bin/pytest -q tests/airflow

# Cluster runs ship the package as a zip (--py-files takes .zip/.egg/.jar; a .whl fails on
# executors with "No module named"). pandas/pyarrow/numpy/scipy come from the cluster image, or
# from package-env's venv-pack archive (its python links to this machine's Python 3.11:
# the nodes need that path, or say where theirs is with PYTHON_PREFIX=/usr).
.PHONY: package package-env
package: setup ## build dist/recsys_spark.zip for spark-submit --py-files
	$(BIN)/python jobs/package.py zip

build/venv-pack/venv_pack/__init__.py:
	$(BIN)/pip install --quiet --disable-pip-version-check --target build/venv-pack 'venv-pack==0.2.0'

package-env: setup build/venv-pack/venv_pack/__init__.py ## optional: dist/env.tar.gz, pandas/pyarrow/numpy/scipy/jinja2 for --archives
	PYTHONPATH=build/venv-pack $(BIN)/python jobs/package.py env $(if $(PYTHON_PREFIX),--python-prefix $(PYTHON_PREFIX))

DEMO_START ?= 2026-11-14
DEMO_OUT = $(DEMO_DIR)/output
# the tour's experiments (recsys_spark/cli/demo.py TOUR): one ships (gate exit 0), one must not (12), one needs more time (13)
DEMO_EXPERIMENTS = ranker_v2 fast_retrieval hd_images
demo: $(VENV)/.runtime ## the tour in a few minutes: a week of sample logs, the daily job, an A/B window, offline runs, the report
	$(BIN)/recsys-spark demo --root $(DEMO_DIR)

.PHONY: demo-full
demo-full: $(VENV)/.runtime ## the long tour, one command at a time as a schedule runs them (6,000 users, several minutes)
	$(BIN)/python -m recsys_spark.synthetic.generate --date $(DATE) --output-root $(DEMO_DIR)/input --users 6000 --days 8 --seed 7
	$(BIN)/recsys-spark evaluate --start $(DEMO_START) --end $(DATE) --input-root $(DEMO_DIR)/input \
		--output-root $(DEMO_OUT) --set 'slices.names=["platform","user_type","popularity"]'
	for e in $(DEMO_EXPERIMENTS); do \
		$(BIN)/recsys-spark experiment --experiment $$e --start $(DEMO_START) --end $(DATE) --output-root $(DEMO_OUT) || exit 1; \
	done
	$(BIN)/python -m recsys_spark.synthetic.generate_offline --output-root $(DEMO_DIR)/offline-input --users 2000 --items 1000 --seed 7
	$(BIN)/recsys-spark offline --run base --output-root $(DEMO_OUT) --config $(DEMO_DIR)/offline-input/offline.toml
	$(BIN)/recsys-spark offline --run candidate --output-root $(DEMO_OUT) --config $(DEMO_DIR)/offline-input/offline.toml
	$(BIN)/recsys-spark offline-compare --output-root $(DEMO_OUT) --base base --candidate candidate \
		--config $(DEMO_DIR)/offline-input/offline.toml
	$(BIN)/recsys-spark gate --name candidate --output-root $(DEMO_OUT) --config conf/gate-offline.toml; \
		code=$$?; [ $$code -eq 0 ] || [ $$code -eq 12 ] || [ $$code -eq 13 ] || exit $$code
	for e in $(DEMO_EXPERIMENTS); do \
		$(BIN)/recsys-spark gate --name $$e --output-root $(DEMO_OUT) --config conf/gate-experiment.toml \
			--set gate.experiment=$$e --set gate.start=$(DEMO_START) --set gate.end=$(DATE); \
		code=$$?; [ $$code -eq 0 ] || [ $$code -eq 12 ] || [ $$code -eq 13 ] || exit $$code; \
	done
	@echo "report: $$($(BIN)/recsys-spark report --output-root $(DEMO_OUT) --start $(DEMO_START) --end $(DATE))"
	@echo "outputs: $(DEMO_OUT)/{metrics,user_metrics,lorenz,rule_checks,experiments,summary}/dt=..., $(DEMO_OUT)/offline/{metrics,...}/run=..., $(DEMO_OUT)/gate/NAME/verdict.json"

# The output tables of the previous release for tests/daily/test_upgrade.py (tests/fixtures/README.md): the commit's own
# demo in a temporary git worktree, on this venv's python with PYTHONPATH on the old tree (FIXTURE_PYTHON for
# a venv of its own); replaces tests/fixtures/previous_release/.  Run it when a release is cut.
FIXTURE_COMMIT ?= fixtures/2026-11-previous
FIXTURE_PYTHON ?= $(CURDIR)/$(BIN)/python
.PHONY: fixtures-previous
fixtures-previous: $(VENV)/.runtime ## regenerate tests/fixtures/previous_release from FIXTURE_COMMIT's own code
	$(BIN)/python tests/fixtures/make_previous_release.py --commit $(FIXTURE_COMMIT) --python $(FIXTURE_PYTHON)

# The golden values of the always-valid intervals (tests/kernels/test_sequential.py): GrowthBook's gbstats from PyPI in
# a throwaway venv, on the same sufficient statistics; prints the GOLDEN literal the test holds, with the version.
GBSTATS_VENV ?= /tmp/gbvenv
.PHONY: golden-gbstats
golden-gbstats: ## print gbstats' sequential, CUPED and accumulated-users golden values for tests/kernels/test_sequential.py, kernels/test_experiments.py and experiments/test_cumulative.py (a throwaway venv)
	test -x $(GBSTATS_VENV)/bin/python || { $(PY) -m venv $(GBSTATS_VENV) && $(GBSTATS_VENV)/bin/pip install --quiet gbstats; }
	$(GBSTATS_VENV)/bin/python tests/golden/gbstats_sequential.py
	$(GBSTATS_VENV)/bin/python tests/golden/gbstats_cuped.py
	$(GBSTATS_VENV)/bin/python tests/golden/gbstats_cumulative.py

BENCH_SIZES ?= 1M,5M,20M
BENCH_REPEATS ?= 3

.PHONY: bench bench-sweep bench-smoke bench-cold
bench: setup ## time the job against the plain floor, the labelled floor and the peers at 1M/5M/20M rows (long): build/bench/report.md
	$(BIN)/python -m benchmarks.bench --sizes $(BENCH_SIZES) --repeats $(BENCH_REPEATS)

bench-sweep: setup ## time the metric stage under a few rows_per_bucket / arrow_batch_rows settings at 5M: build/bench/sweep.md
	$(BIN)/python -m benchmarks.bench --sweep --sizes 5M --repeats 2

bench-cold: setup ## the job, the plain floor and the floor as new processes on a 2M-exposure day (cold): build/bench/cold.md
	$(BIN)/python -m benchmarks.cold --size 2M --repeats 3

bench-smoke: setup ## the benchmark on a tiny day, once: the harness runs and agrees with the peers
	$(BIN)/python -m benchmarks.bench --smoke --root build/bench-smoke

clean: ## remove build outputs (keeps .venv)
	rm -rf build dist spark-warehouse metastore_db

# Mutation testing (docs/mutation.md): mutmut over recsys_spark/kernels/ with the fast tests, two
# workers (about 25 min for the 7,000 kernel mutants on the shared 2-core box), then the curated
# Spark-layer mutants (about 15 min: each runs a Spark test module).  Not part of `make test`; run it
# before a release or after changing a formula.  Survivors: .venv/bin/mutmut results; .venv/bin/mutmut
# show NAME; per module: .venv/bin/python tests/mutation/mutmut_report.py.  The two report-rendering
# tests reach no kernel formula that other tests miss and take seconds per mutant: kept out through
# PYTEST_ADDOPTS (not [tool.mutmut], whose change would discard every recorded result).
MUTMUT_PYTEST := --deselect tests/report/test_report.py::test_rendering_twice_gives_the_same_bytes \
	--deselect tests/report/test_browser.py::test_chromium_renders_the_report \
	--ignore tests/test_layers.py
$(BIN)/mutmut: $(VENV)/.test
	$(BIN)/pip install --quiet 'mutmut==3.8.1'
	@touch $@

.PHONY: mutate
mutate: $(BIN)/mutmut ## mutation score of the kernels (mutmut) and of the Spark layer's formula lines (long)
	rm -rf mutants
	PYTEST_ADDOPTS="$(MUTMUT_PYTEST)" env -u PYTHONPATH $(BIN)/mutmut run --max-children 2
	$(BIN)/python tests/mutation/mutmut_report.py
	$(BIN)/python tests/mutation/spark_mutants.py
