"""Shared fixtures: one local SparkSession for the whole test run, tuned for 2 cores."""

from __future__ import annotations

import pytest

collect_ignore = [
    "airflow",
    "golden",
    "fixtures",
]  # the DAG test runs in its own venv (make test-airflow); golden/: scripts run in throwaway venvs; fixtures/: data


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """tests/ops/ holds whole processes (a metastore, a cluster, chaos, the CLI, a Connect server): each of its
    tests is marked ``process``, so that ``make check`` (the quick loop) leaves them to ``make test``."""
    for item in items:
        if "ops" in item.path.parts[-2:-1]:
            item.add_marker(pytest.mark.process)


@pytest.fixture(scope="session")
def spark():
    from recsys_spark.runtime.session import build_session, job_settings

    session = build_session(
        app_name="recsys-spark-tests",
        master="local[2]",
        settings={
            **job_settings(2),  # the settings the job runs with; the lines below tune them for tests
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.sql.execution.arrow.maxRecordsPerBatch": "2",  # exercise batch boundaries
            "spark.driver.memory": "1g",
        },
        log_level="ERROR",
    )
    yield session
    session.stop()
