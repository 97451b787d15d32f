"""Isolate the Airflow DAG tests (run by ``make test-airflow`` in ``.venv-airflow``).

Imports nothing from Airflow, so it is harmless wherever it is loaded. It only gives
Airflow a throw-away AIRFLOW_HOME before the test module imports Airflow, so nothing
is written to the repo or to ~/airflow.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

_home: str | None = None


def pytest_configure(config) -> None:
    global _home
    _home = tempfile.mkdtemp(prefix="recsys-airflow-home-")
    os.environ["AIRFLOW_HOME"] = _home
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = os.path.join(_home, "dags")
    # the DagBag imports jobs/airflow/*.py: leave no __pycache__ there
    sys.dont_write_bytecode = True


def pytest_unconfigure(config) -> None:
    if _home:
        shutil.rmtree(_home, ignore_errors=True)
