"""``recsys-spark plan`` (docs/experiments.md, "Plan"): the users per arm and the days from the metrics table's
recent days, against statsmodels' NormalIndPower and by hand; bad flags exit 2, no data exits 4."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recsys_spark.cli import run
from recsys_spark.kernels.power import sample_size_per_arm, sequential_sample_size_per_arm, sequential_width_ratio

#: (day, value, users, se) of exposure_ctr_global on three days; the per-user variance is n se² each day
DAYS = [("2026-11-18", 0.10, 1000, 0.0100), ("2026-11-19", 0.12, 1200, 0.0090), ("2026-11-20", 0.11, 800, 0.0110)]


def _write_days(root, days=DAYS, complete=True) -> None:
    schema = pa.schema(
        [
            ("metric", pa.string()),
            ("k", pa.int32()),
            ("aggregation", pa.string()),
            ("slice", pa.string()),
            ("value", pa.float64()),
            ("n", pa.int64()),
            ("se", pa.float64()),
            ("ci_low", pa.float64()),
            ("ci_high", pa.float64()),
            ("ci_method", pa.string()),
        ]
    )
    for day, value, n, se in days:
        rows = [
            ("exposure_ctr", None, "global", "all", value, n, se, value - 2 * se, value + 2 * se, "delta"),
            ("exposure_ctr", None, "global", "mobile", 0.5, 10, 0.1, 0.3, 0.7, "delta"),  # another slice: not read
            ("ndcg", 10, "user_avg", "all", 0.3, n, 0.002, 0.29, 0.31, "t"),
        ]
        path = root / "metrics" / f"dt={day}"
        path.mkdir(parents=True)
        table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
        pq.write_table(table, path / "part-0.parquet")
        if complete:
            (root / "summary" / f"dt={day}").mkdir(parents=True)
            (root / "summary" / f"dt={day}" / "_SUCCESS").write_text("")


@pytest.fixture
def session(spark, monkeypatch):
    import recsys_spark.runtime.session as sessions

    monkeypatch.setattr(spark, "stop", lambda: None)  # the tests' shared session outlives the command
    monkeypatch.setattr(sessions, "job_session", lambda *a, **k: spark)
    return spark


@pytest.mark.spark
def test_plan_prints_the_users_per_arm_and_the_days_and_writes_its_table(session, tmp_path, capsys):
    _write_days(tmp_path)
    code = run(
        ["plan", "--metric", "exposure_ctr_global", "--mde", "0.1", "--relative", "--output-root", str(tmp_path)]
    )
    assert code == 0
    out = capsys.readouterr().out
    users = sum(n for _, _, n, _ in DAYS)  # 3000
    variance = sum(n * n * se * se for _, _, n, se in DAYS) / users  # days weighted by their users
    baseline = sum(n * v for _, v, n, _ in DAYS) / users  # 0.1113...
    delta = 0.1 * baseline
    from statsmodels.stats.power import NormalIndPower

    independent = NormalIndPower().solve_power(effect_size=delta / math.sqrt(variance), alpha=0.05, power=0.8)
    n = math.ceil(sample_size_per_arm(variance, variance, delta))
    assert n == math.ceil(independent)
    days = math.ceil(2 * n / (users / 3))
    assert f"{n} users per arm (fixed horizon): {days} day(s)" in out
    row = session.read.parquet(str(tmp_path / "plan" / "metric=exposure_ctr_global")).first().asDict()
    assert row["users_per_arm"] == n and row["days"] == days and row["days_read"] == 3
    assert row["variance"] == pytest.approx(variance) and row["baseline"] == pytest.approx(baseline)
    assert (row["first_day"], row["last_day"]) == ("2026-11-18", "2026-11-20")
    # the sequence: n_seq = (r(2 n_seq) z + z_power)² 2σ²/δ², at the bisection's half a user
    seq = row["sequential_users_per_arm"]
    r = sequential_width_ratio(2 * seq)
    assert seq == pytest.approx((r * 1.959963985 + 0.841621234) ** 2 * 2 * variance / delta**2, abs=1.5)
    assert seq == math.ceil(sequential_sample_size_per_arm(variance, variance, delta))
    assert "users per arm with the always-valid intervals" in out


@pytest.mark.spark
def test_plan_reads_the_last_complete_days_only_and_a_metric_at_k(session, tmp_path, capsys):
    _write_days(tmp_path)
    _write_days(tmp_path, [("2026-11-21", 0.5, 10, 0.5)], complete=False)  # a run that did not finish
    assert (
        run(["plan", "--metric", "ndcg@10_user_avg", "--mde", "0.01", "--days", "2", "--output-root", str(tmp_path)])
        == 0
    )
    row = session.read.parquet(str(tmp_path / "plan" / "metric=ndcg@10_user_avg")).first().asDict()
    assert (row["first_day"], row["last_day"], row["days_read"]) == ("2026-11-19", "2026-11-20", 2)
    assert row["variance"] == pytest.approx((1200 * 1200 + 800 * 800) * 0.002**2 / 2000)


@pytest.mark.spark
def test_no_data_for_the_metric_exits_4_with_one_line(session, tmp_path, capsys):
    _write_days(tmp_path)
    assert run(["plan", "--metric", "pv_ctr_global", "--mde", "0.01", "--output-root", str(tmp_path)]) == 4
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("recsys-spark: error: no per-user variance for pv_ctr_global")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--metric", "exposure_ctr_globl", "--mde", "0.1"], "--metric"),
        (["--metric", "exposure_ctr_global", "--mde", "-1"], "--mde"),
        (["--metric", "exposure_ctr_global", "--mde", "0.1", "--power", "1.5"], "--power"),
        (["--metric", "exposure_ctr_global", "--mde", "0.1", "--days", "0"], "--days"),
        (["--metric", "exposure_ctr_global"], "--mde"),
    ],
)
def test_bad_flags_exit_2_with_one_line_before_spark_starts(capsys, args, needle):
    assert run(["plan", *args, "--output-root", "o"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("recsys-spark: error:") and needle in line
