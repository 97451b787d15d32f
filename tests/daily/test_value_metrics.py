"""Value metrics (GMV, dwell), click counts and conversion rates through the daily job and the experiments,
against a pandas reference on a small hand-made day: values, n, and the delta-method intervals (the user as
the unit) computed here from per-user arrays, independently of the kernels."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from helpers.days import DAY, EXPOSURE_SCHEMA, NOON, VALUED_CLICK_SCHEMA, write
from scipy import stats

from recsys_spark.config import load_config
from recsys_spark.daily import evaluate_day
from recsys_spark.experiments.window import run_window

pytestmark = pytest.mark.spark

Z95 = stats.norm.ppf(0.975)
EXPOSURES = EXPOSURE_SCHEMA.append(pa.field("platform", pa.string()))
CLICKS = VALUED_CLICK_SCHEMA
ASSIGNMENTS = pa.schema([("user_id", pa.string()), ("experiment", pa.string()), ("variant", pa.string())])
LATER = NOON + dt.timedelta(minutes=2)

# per user: platform, requests (each a list of items), and its events (request, item, event, value, dwell)
USERS = {
    "u1": (
        "ios",
        [["a", "b", "c"], ["d", "e"]],
        [
            ("r0", "a", "click", None, 30.0),
            ("r0", "a", "click", None, 10.0),
            ("r0", "a", "purchase", 25.0, None),
            ("r1", "e", "click", None, 4.0),
        ],
    ),
    "u2": (
        "ios",
        [["a", "c", "f"]],
        [("r0", "c", "click", None, 61.0), ("r0", "c", "purchase", 120.0, None), ("r0", "f", "purchase", 15.5, None)],
    ),
    "u3": ("web", [["b", "d"], []], [("r0", "b", "click", None, 8.0)]),  # r1: an empty response
    "u4": ("web", [["a", "b", "c", "d"]], []),
    "u5": ("ios", [["f", "e"]], [("r0", "e", "click", None, 300.0), ("r0", "e", "purchase", 0.0, None)]),  # free
    "u6": ("web", [["c"]], [("r0", "c", "click", None, None)]),  # a click without a dwell time
    "u7": ("android", [[]], []),  # only an empty response: a user with a request, not with an exposure
}
ORPHAN = ("u1", "s-u1", "u1-r9", "z", LATER, "purchase", 500.0, None)  # never shown: counts nowhere
BAD = ("u4", "s-u4", "u4-r0", "a", LATER, "purchase", float("nan"), None)  # set aside: bad_value


def day_rows(day: dt.date, users=USERS):
    noon = NOON.replace(year=day.year, month=day.month, day=day.day)
    exposures, clicks = [], []
    for uid, (platform, requests, events) in users.items():
        for r, items in enumerate(requests):
            request = f"{uid}-r{r}"
            if not items:
                exposures.append((uid, f"s-{uid}", request, None, None, None, noon, platform))
            for p, item in enumerate(items, start=1):
                exposures.append((uid, f"s-{uid}", request, item, p, 1 - p / 10, noon, platform))
        for r, item, event, value, dwell in events:
            clicks.append((uid, f"s-{uid}", f"{uid}-{r}", item, noon + dt.timedelta(minutes=2), event, value, dwell))
    return exposures, clicks


def reference(users=USERS, platform: str | None = None) -> pd.DataFrame:
    """Per user (with a request in the slice): requests, exposures, clicked exposures, clicks, value, whether a
    value was attributed, dwell, exposures with a purchase: the textbook definitions, in pandas."""
    rows = []
    for uid, (p, requests, events) in users.items():
        if platform is not None and p != platform:
            continue
        shown = {(f"r{r}", item) for r, items in enumerate(requests) for item in items}
        ev = pd.DataFrame(events, columns=["request", "item", "event", "value", "dwell"])
        ev = ev.loc[np.array([(r, i) in shown for r, i in zip(ev["request"], ev["item"], strict=True)], dtype=bool)]
        clicked = ev[ev["event"] == "click"].groupby(["request", "item"]).size()
        purchased = ev[ev["event"] == "purchase"].groupby(["request", "item"]).size()
        rows.append(
            {
                "user": uid,
                "pv": len(requests),
                "e": len(shown),
                "c": len(clicked),
                "k": int(clicked.sum()),
                "v": ev["value"].sum(),
                "valued": ev["value"].notna().any(),
                "d": ev["dwell"].sum(),
                "x": len(purchased),
            }
        )
    return pd.DataFrame(rows).set_index("user")


def delta(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """R = Σx / Σy and its delta-method se, the user as the unit: sd(x - R y) / (sqrt(n) mean(y))."""
    if not y.sum():
        return math.nan, math.nan
    r = x.sum() / y.sum()
    return r, float(np.std(x - r * y, ddof=1) / math.sqrt(len(x)) / y.mean())


def expected(u: pd.DataFrame) -> dict[str, tuple[float, float, int]]:
    """metric -> (value, se, n) of every business row from the per-user table."""
    ones = np.ones(len(u))
    exposed = u[u["e"] > 0]
    e_ones = np.ones(len(exposed))
    f = {c: u[c].to_numpy(dtype=float) for c in u.columns}
    rows = {
        "exposure_ctr": (f["c"], f["e"], f["e"].sum()),
        "pv_ctr": (f["c"], f["pv"], f["pv"].sum()),
        "uv_ctr": (f["c"], ones, len(u)),
        "clicks_per_exposure": (f["k"], f["e"], f["e"].sum()),
        "clicks_per_request": (f["k"], f["pv"], f["pv"].sum()),
        "clicks_per_user": (f["k"], ones, len(u)),
        "clicks_per_clicking_user": (f["k"], (f["c"] > 0).astype(float), (f["c"] > 0).sum()),
        "gmv_per_exposure": (f["v"], f["e"], f["e"].sum()),
        "gmv_per_request": (f["v"], f["pv"], f["pv"].sum()),
        "gmv_per_user": (exposed["v"].to_numpy(float), e_ones, len(exposed)),
        "value_per_converting_user": (f["v"], f["valued"].astype(float), f["valued"].sum()),
        "dwell_per_click": (f["d"], f["k"], f["k"].sum()),
        "dwell_per_user": (exposed["d"].to_numpy(float), e_ones, len(exposed)),
        "purchase_user_rate": ((exposed["x"] > 0).to_numpy(float), e_ones, len(exposed)),
        "purchase_exposure_rate": (f["x"], f["e"], f["e"].sum()),
    }
    return {m: (*delta(x, y), int(n)) for m, (x, y, n) in rows.items()}


@pytest.fixture(scope="module")
def value_day(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("value")
    exposures, clicks = day_rows(DAY)
    write(root / "in" / "exposures" / f"dt={DAY}", exposures, EXPOSURES)
    write(root / "in" / "clicks" / f"dt={DAY}", [*clicks, ORPHAN, BAD], CLICKS)
    arms = {"u1": "control", "u2": "treatment", "u3": "control", "u4": "treatment", "u5": "control", "u6": "treatment"}
    write(root / "in" / "assignments" / f"dt={DAY}", [(u, "shop", arm) for u, arm in arms.items()], ASSIGNMENTS)
    settings = [
        "metrics.k=[1]",
        "rules.fail_on_hard=false",
        'slices.names=["platform"]',
        'experiments.metrics=["gmv_per_user_global", "gmv_per_exposure_global", "purchase_user_rate_global"]',
        'experiments.inference="fixed"',  # the fixed-horizon tests, to compare with scipy's Welch
    ]
    summary = evaluate_day(spark, load_config(None, settings), DAY, str(root / "in"), str(root / "out"))
    metrics = pd.read_parquet(root / "out" / "metrics" / f"dt={DAY}")
    return root, summary, metrics, arms


@pytest.mark.parametrize("platform", [None, "ios", "web"])
def test_every_business_row_equals_the_pandas_reference_with_its_delta_interval(value_day, platform):
    _, _, metrics, _ = value_day
    slice_key = "all" if platform is None else f"platform={platform}"
    got = metrics[(metrics["slice"] == slice_key) & (metrics["aggregation"] == "global")].set_index("metric")
    for name, (value, se, n) in expected(reference(platform=platform)).items():
        row = got.loc[name]
        if math.isnan(value):  # no unit in the denominator (web has no converting user): null, never 0
            assert pd.isna(row["value"]) and row["n"] == n == 0, (slice_key, name)
            continue
        assert row["value"] == pytest.approx(value, rel=1e-12), (slice_key, name)
        assert row["n"] == n, (slice_key, name)
        if np.isfinite(se) and len(reference(platform=platform)) > 1:
            assert row["se"] == pytest.approx(se, rel=1e-9), (slice_key, name)
            assert row["ci_method"] == "delta", (slice_key, name)
            assert row["ci_high"] - row["value"] == pytest.approx(Z95 * se, rel=1e-9), (slice_key, name)


def test_the_all_slice_by_hand(value_day):
    # V = 25 + 120 + 15.5 + 0 = 160.5 (the orphan's 500 and the NaN row's are not attributed); E = 17 exposures
    # (u7 has none), PV = 9 requests, UE = 6 users with exposures, 4 with a value (u5's free purchase counts);
    # K = 7 clicks (u1 clicked a twice) on C = 6 clicked exposures; D = 30 + 10 + 4 + 61 + 8 + 300 = 413 s
    _, summary, metrics, _ = value_day
    got = metrics[metrics["slice"] == "all"].set_index("metric")["value"]
    assert got["gmv_per_exposure"] == pytest.approx(160.5 / 17)
    assert got["gmv_per_request"] == pytest.approx(160.5 / 9)
    assert got["gmv_per_user"] == pytest.approx(160.5 / 6)
    assert got["value_per_converting_user"] == pytest.approx(160.5 / 3)  # u1, u2, u5
    assert got["dwell_per_click"] == pytest.approx(413 / 7)
    assert got["dwell_per_user"] == pytest.approx(413 / 6)
    assert got["purchase_user_rate"] == pytest.approx(3 / 6)
    assert got["purchase_exposure_rate"] == pytest.approx(4 / 17)
    assert (got["exposure_ctr"], got["clicks_per_exposure"]) == (pytest.approx(6 / 17), pytest.approx(7 / 17))
    assert got["clicks_per_clicking_user"] == pytest.approx(7 / 5)  # 5 clicking users; 6 / 5 clicked exposures
    assert summary["data_quality"]["rejected_clicks"] == {"bad_value": 1}


def test_gmv_per_user_and_the_purchase_rate_through_the_experiment(value_day):
    # the experiment's rows: a mean over each arm's users with exposures (Welch), a ratio by the delta method
    root, summary, _, arms = value_day
    rows = pd.read_parquet(root / "out" / "experiments" / f"dt={DAY}")
    rows = rows[rows["slice"] == "all"].set_index("metric")
    u = reference()
    arm = u.index.map(arms)
    control, treatment = u[(arm == "control") & (u["e"] > 0)], u[(arm == "treatment") & (u["e"] > 0)]
    row = rows.loc["gmv_per_user"]
    assert (row["value"], row["control_value"]) == (
        pytest.approx(treatment["v"].mean()),
        pytest.approx(control["v"].mean()),
    )
    welch = stats.ttest_ind(treatment["v"], control["v"], equal_var=False)
    assert row["method"] == "welch" and row["p_value"] == pytest.approx(welch.pvalue, rel=1e-9)
    se = math.sqrt(treatment["v"].var(ddof=1) / 3 + control["v"].var(ddof=1) / 3)
    assert row["se"] == pytest.approx(se, rel=1e-12)
    rate = rows.loc["purchase_user_rate"]
    assert (rate["value"], rate["control_value"]) == (pytest.approx(1 / 3), pytest.approx(2 / 3))
    ratio = rows.loc["gmv_per_exposure"]
    (rt, st), (rc, sc) = (delta(a["v"].to_numpy(float), a["e"].to_numpy(float)) for a in (treatment, control))
    assert (ratio["value"], ratio["control_value"], ratio["method"]) == (pytest.approx(rt), pytest.approx(rc), "delta")
    assert ratio["se"] == pytest.approx(math.sqrt(st**2 + sc**2), rel=1e-9)
    assert summary["experiments"]["status"] in ("ok", "srm_failed")


def test_a_window_counts_a_users_value_over_its_days_once(spark, value_day, tmp_path):
    # two days of the same users: over the window gmv_per_user is each exposed user's value of both days, and a
    # user exposed on both days is one user (its "exposed" is 1, not 2)
    root, *_ = value_day
    previous = DAY - dt.timedelta(days=1)
    exposures, clicks = day_rows(previous)
    write(root / "in" / "exposures" / f"dt={previous}", exposures, EXPOSURES)
    write(root / "in" / "clicks" / f"dt={previous}", clicks, CLICKS)
    arms = value_day[3]
    write(root / "in" / "assignments" / f"dt={previous}", [(u, "shop", a) for u, a in arms.items()], ASSIGNMENTS)
    cfg = load_config(
        None, ["metrics.k=[1]", "rules.fail_on_hard=false", 'experiments.metrics=["gmv_per_user_global"]']
    )
    evaluate_day(spark, cfg, previous, str(root / "in"), str(root / "out"))
    run_window(spark, cfg, "shop", previous, DAY, str(root / "out"))
    rows = pd.read_parquet(root / "out" / "experiment_window" / "experiment=shop" / f"window={previous}_{DAY}")
    row = rows[(rows["slice"] == "all") & (rows["metric"] == "gmv_per_user")].iloc[0]
    u = reference()
    treated = u[(u.index.map(arms) == "treatment") & (u["e"] > 0)]
    assert row["n"] == len(treated) == 3
    assert row["value"] == pytest.approx(2 * treated["v"].mean())  # the same value both days


def test_experiment_users_by_hand_and_the_same_when_every_user_takes_the_bounded_path(spark, value_day, tmp_path):
    # the day's sums per user come from the one Python pass (kernels/user_day.py); a user the pass sets aside
    # (execution.max_user_rows) gets them from Spark expressions instead (experiments.user_day_sums): both give
    # the textbook values, and the same table
    root, *_ = value_day
    got = pd.read_parquet(root / "out" / "experiment_users" / f"dt={DAY}")
    u = reference()
    mine = got[got["slice"] == "all"].set_index("user_id").sort_index()
    assert list(mine.index) == sorted(u.index)  # u7 (only an empty response) too
    ref = u.loc[mine.index]
    assert (mine["requests"] == ref["pv"]).all() and (mine["exposures"] == ref["e"]).all()
    assert (mine["clicked"] == ref["c"]).all() and (mine["click_events"] == ref["k"]).all()
    assert mine["value"].to_numpy() == pytest.approx(ref["v"].to_numpy(float))
    assert mine["dwell"].to_numpy() == pytest.approx(ref["d"].to_numpy(float))
    assert (mine["valued"] == ref["valued"].astype(float)).all()
    assert (mine["ev_purchase_exposures"] == ref["x"]).all()
    assert (mine["ev_purchase_user"] == (ref["x"] > 0).astype(float)).all()
    assert (mine["exposed"] == (ref["e"] > 0).astype(float)).all()
    assert mine.loc["u3", "empty_requests"] == 1 and mine.loc["u7", "empty_requests"] == 1
    assert mine.loc["u7", "lists_ranked"] == 0 and mine.loc["u1", "lists_ranked"] == 2
    assert sorted(got["slice"].unique()) == ["all", "platform=android", "platform=ios", "platform=web"]

    # the same day and u8, whose one-item request is not empty, on both paths: every user with more than one
    # row (u1 to u5, u8) is set aside on the second
    users = dict(USERS, u8=("web", [["a"], ["b", "c"]], [("r1", "c", "purchase", 9.0, None)]))
    exposures, clicks = day_rows(DAY, users)
    write(tmp_path / "in" / "exposures" / f"dt={DAY}", exposures, EXPOSURES)
    write(tmp_path / "in" / "clicks" / f"dt={DAY}", clicks, CLICKS)
    write(tmp_path / "in" / "assignments" / f"dt={DAY}", [(u, "shop", "control") for u in users], ASSIGNMENTS)
    settings = [
        "metrics.k=[1]",
        "rules.fail_on_hard=false",
        'slices.names=["platform"]',
        'experiments.metrics=["gmv_per_user_global"]',
    ]
    tables = []
    for run, bound in (("pass", []), ("bounded", ["execution.max_user_rows=1"])):
        cfg = load_config(None, settings + bound)
        summary = evaluate_day(spark, cfg, DAY, str(tmp_path / "in"), str(tmp_path / run))
        assert summary["data_quality"]["users_over_row_bound"] == (6 if bound else 0)
        table = pd.read_parquet(tmp_path / run / "experiment_users" / f"dt={DAY}").drop(columns="variants")
        tables.append(table.sort_values(["slice", "user_id"]).reset_index(drop=True))
    assert tables[0].loc[(tables[0]["slice"] == "all") & (tables[0]["user_id"] == "u8"), "empty_requests"].item() == 0
    pd.testing.assert_frame_equal(tables[0], tables[1], check_exact=False, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "values, value_is_null",
    [((1e308, 1e308), True), ((1e200,), False)],  # Σ value = inf; Σ value finite but Σ value² = inf
)
def test_values_whose_sums_overflow_give_no_interval_and_a_note_never_se_0(spark, tmp_path, values, value_is_null):
    """Two purchases of 1e308 gave GMV = inf with se 0; one of 1e200 a finite GMV with se 0 (its square
    overflows): no interval then, a note naming the sum of value, and a null value where it is not finite,
    in the day's metrics and in the experiment's comparisons."""
    events = [("r0", item, "purchase", value, None) for item, value in zip("acf", values, strict=False)]
    users = dict(USERS, u2=("ios", [["a", "c", "f"]], events))
    exposures, clicks = day_rows(DAY, users)
    write(tmp_path / "in" / "exposures" / f"dt={DAY}", exposures, EXPOSURES)
    write(tmp_path / "in" / "clicks" / f"dt={DAY}", clicks, CLICKS)
    arms = {"u1": "control", "u2": "treatment", "u3": "control", "u4": "treatment", "u5": "control", "u6": "treatment"}
    write(tmp_path / "in" / "assignments" / f"dt={DAY}", [(u, "shop", a) for u, a in arms.items()], ASSIGNMENTS)
    settings = [
        "metrics.k=[1]",
        "rules.fail_on_hard=false",
        'experiments.metrics=["gmv_per_user_global", "gmv_per_exposure_global"]',
        'experiments.inference="fixed"',
    ]
    summary = evaluate_day(spark, load_config(None, settings), DAY, str(tmp_path / "in"), str(tmp_path / "out"))
    metrics = pd.read_parquet(tmp_path / "out" / "metrics" / f"dt={DAY}")
    got = metrics[(metrics["slice"] == "all") & (metrics["aggregation"] == "global")].set_index("metric")
    for name in ("gmv_per_exposure", "gmv_per_request", "gmv_per_user", "value_per_converting_user"):
        row = got.loc[name]
        assert pd.isna(row["se"]) and pd.isna(row["ci_low"]) and row["ci_method"] == "none", name
        assert pd.isna(row["value"]) == value_is_null, name
    assert got.loc["dwell_per_user", "ci_method"] == "delta"  # the other sums are fine
    sigma = "Σ value = inf" if value_is_null else "Σ value² = inf"
    note = next(n for n in summary["notes"] if n.startswith("no interval for gmv_per_exposure"))
    assert f"a sum overflows a double ({sigma})" in note and "value_per_converting_user" in note
    rows = pd.read_parquet(tmp_path / "out" / "experiments" / f"dt={DAY}")
    rows = rows[rows["slice"] == "all"].set_index("metric")
    assert pd.isna(rows.loc["gmv_per_user", "se"]) and pd.isna(rows.loc["gmv_per_user", "p_value"])
    assert any(n.startswith("experiment shop: no interval for gmv_per_user (treatment") for n in summary["notes"])
