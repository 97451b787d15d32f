.DEFAULT_GOAL := help
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
DATE ?= 2026-11-20
DEMO_DIR ?= build/demo

.PHONY: help setup test test-fast demo clean

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-14s %s\n", $$1, $$2}'

$(BIN)/recsys-spark: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

setup: $(BIN)/recsys-spark ## create .venv and install the project with its test dependencies

test: setup ## run the whole test suite
	$(BIN)/pytest -q

test-fast: setup ## kernel-only tests (no Spark), seconds
	$(BIN)/pytest -q -m "not spark"

# Airflow gets its own venv: installed beside pyspark in .venv, the Spark provider
# replaced pyspark 4.3's files with 4.2's without a warning. Pinned; after changing a
# pin, rm -rf .venv-airflow.
.venv-airflow/bin/airflow:
	$(PY) -m venv .venv-airflow
	.venv-airflow/bin/pip install --quiet --upgrade pip
	.venv-airflow/bin/pip install --quiet 'apache-airflow==3.3.2' 'apache-airflow-providers-apache-spark==6.3.4' 'pytest>=8' || { rm -f $@; exit 1; }
	@touch $@

.PHONY: test-airflow
test-airflow: .venv-airflow/bin/airflow ## run the Airflow DAG test in its own venv
	.venv-airflow/bin/pytest -q tests/airflow

demo: setup ## generate a sample day and run the daily job on it in local mode
	$(BIN)/python -m recsys_spark.generate --date $(DATE) --output-root $(DEMO_DIR)/input --users 2000 --seed 7
	$(BIN)/recsys-spark evaluate --date $(DATE) --input-root $(DEMO_DIR)/input --output-root $(DEMO_DIR)/output

clean: ## remove build outputs (keeps .venv)
	rm -rf build dist spark-warehouse metastore_db
