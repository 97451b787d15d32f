"""recsys-spark ope on Spark: obp's golden values on the Open Bandit Dataset and on a slate log, the numpy
reference on a messy log, the user as the unit, bad input in one line, the output layout."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import obp_golden as G

from recsys_spark.config import load_config
from recsys_spark.errors import ConfigError, SchemaError
from recsys_spark.kernels import ope as K
from recsys_spark.ope.run import run_ope

pytestmark = pytest.mark.spark

OBD_START, OBD_END = dt.date(2019, 11, 24), dt.date(2019, 11, 30)
UTC = pa.timestamp("us", tz="UTC")


def write_days(root, exposures: pd.DataFrame, clicks: pd.DataFrame, nan_is_null: bool = True) -> None:
    """Exposures and clicks (pandas, ``ts`` in µs since the epoch) as daily partitions by their UTC day
    (``nan_is_null=False``: a NaN stays a NaN in the file)."""
    for name, frame in (("exposures", exposures), ("clicks", clicks)):
        day = pd.to_datetime(frame["ts"], unit="us", utc=True).dt.date
        for value, part in frame.groupby(day):
            columns = {c: pa.array(part[c].to_numpy(), from_pandas=nan_is_null) for c in part.columns if c != "ts"}
            columns["ts"] = pa.array(part["ts"].to_numpy("int64")).cast(UTC)
            if "position" in columns:
                columns["position"] = pa.array(part["position"].to_numpy(), from_pandas=True).cast(pa.int32())
            table = pa.table(columns)
            path = root / name / f"dt={value}"
            path.mkdir(parents=True)
            pq.write_table(table, path / "part-0.parquet")


@pytest.fixture(scope="module")
def obd(spark, tmp_path_factory):
    """The OBD sample as seven logged days (request = round; obp's rounds have no user: each is its own),
    and the two candidates' tables (their probabilities are the same for every round)."""
    root = tmp_path_factory.mktemp("obd")
    logged = G.obd_logged()
    rid = "r" + logged["round"].astype(str)
    exposures = pd.DataFrame(
        {
            "user_id": "u" + logged["round"].astype(str),
            "session_id": rid,
            "request_id": rid,
            "item_id": logged["item"].astype(str),
            "position": logged["position"].astype("int32"),
            "ts": logged["ts_us"],
            "propensity": logged["propensity"],
        }
    )
    clicked = exposures[logged["click"] == 1]
    write_days(root / "in", exposures, clicked[["user_id", "session_id", "request_id", "item_id", "ts"]])
    for candidate in ("bts", "greedy"):
        write_target(root / "targets" / candidate, rid.to_numpy(), G.obd_target(candidate))
    return root


def write_target(path, requests: np.ndarray, rows: pd.DataFrame) -> None:
    """The candidate's ``rows`` (item, position, probability [, q_hat]) for every request, one Parquet file
    (pyarrow: 2.4 million rows for the Bernoulli TS candidate)."""
    n = len(rows)
    columns = {
        "request_id": pa.array(np.repeat(requests, n)),
        "item_id": pa.array(np.tile(rows["item"].astype(str).to_numpy(), len(requests))),
        "position": pa.array(np.tile(rows["position"].to_numpy("int32"), len(requests))),
        "probability": pa.array(np.tile(rows["probability"].to_numpy(float), len(requests))),
    }
    if "q_hat" in rows:
        columns["q_hat"] = pa.array(np.tile(rows["q_hat"].to_numpy(float), len(requests)))
    path.mkdir(parents=True)
    pq.write_table(pa.table(columns), path / "part-0.parquet")


def _config(root, candidate: str, *more: str):
    return load_config(None, [f'ope.target="{root}/targets/{candidate}"', *more])


def _estimates(root, run: str) -> dict[str, dict]:
    frame = pd.read_parquet(root / "out" / "ope" / "estimates" / f"run={run}")
    return {r["estimator"]: r for r in frame.to_dict("records")}


@pytest.fixture(scope="module")
def obd_runs(spark, obd):
    summaries = {}
    for candidate, tau in (("bts", 10), ("greedy", 100)):  # Switch-DR at both of obp's τ
        run = f"{candidate}{tau}"
        cfg = _config(obd, candidate, f"ope.switch_tau={tau}")
        summaries[run] = run_ope(spark, cfg, run, OBD_START, OBD_END, str(obd / "in"), str(obd / "out"))
    return summaries


@pytest.mark.parametrize("candidate", ["bts", "greedy"])
def test_every_item_level_estimate_equals_obps_on_the_open_bandit_dataset(obd, obd_runs, candidate):
    for tau in (10, 100):
        run = f"{candidate}{tau}"
        if run not in obd_runs:
            continue
        got = _estimates(obd, run)
        for name, want in G.OBD[candidate].items():
            estimator, _, at = name.partition("@")
            if at and int(float(at)) != tau:
                continue
            assert got[estimator]["value"] == pytest.approx(want, abs=1e-9), (run, name)
        assert got["logged"]["value"] == pytest.approx(G.OBD["logged_ctr"], abs=1e-12)
        assert got["switch_dr"]["switch_tau"] == tau


def test_a_stochastic_candidate_gets_no_replay_and_the_run_says_why(obd_runs):
    summary = obd_runs["bts10"]
    assert "replay" not in summary["estimates"]
    assert any(n.startswith("replay skipped: the candidate is not deterministic") for n in summary["notes"])
    assert any(n.startswith("slate_ips skipped") for n in summary["notes"])  # OBD has no list propensity


def test_the_estimates_against_the_bernoulli_ts_policys_own_logged_ctr(obd_runs, obd):
    """docs/ope.md quotes these: how far each estimate lands from the on-policy truth (0.0042)."""
    got = _estimates(obd, "bts10")
    truth = G.OBD["on_policy_bts_ctr"]
    errors = {
        name: abs(got[name]["value"] - truth) / truth for name in ("ips", "snips", "dm", "dr", "sndr", "switch_dr")
    }
    assert errors["ips"] == pytest.approx(0.115, abs=0.001)  # 0.0046832 against 0.0042
    assert all(error < 0.2 for error in errors.values()), errors
    for name in ("ips", "snips", "dr", "sndr"):  # each interval holds the truth
        assert got[name]["ci_low"] < truth < got[name]["ci_high"], name
    assert got["ips"]["n"] == 10_000 and got["ips"]["units"] == 10_000


def test_the_diagnostics_of_the_bernoulli_ts_run(obd, obd_runs):
    frame = pd.read_parquet(obd / "out" / "ope" / "diagnostics" / "run=bts10")
    d = dict(zip(frame["diagnostic"], frame["value"], strict=True))
    assert list(frame["diagnostic"]) == list(K.DIAGNOSTICS)
    assert d["rows"] == 10_000 and d["rows_without_propensity"] == 0
    assert d["mean_weight"] == pytest.approx(1.0, abs=0.05)  # uniform logging: E[w] = Σ_a π_e(a) = 1
    assert 0 < d["effective_sample_size"] < 10_000
    assert d["unsupported_target_share"] == pytest.approx(0.0, abs=1e-12)  # every pair was logged


def test_every_table_reads_at_its_root_with_the_run_as_a_column(obd, obd_runs):
    frame = pd.read_parquet(obd / "out" / "ope" / "estimates")
    assert {"bts10", "greedy100"} <= set(frame["run"].astype(str))
    summary = json.loads((obd / "out" / "ope" / "summary" / "run=bts10" / "summary.json").read_text())
    assert (obd / "out" / "ope" / "summary" / "run=bts10" / "_SUCCESS").exists()
    assert summary["days_found"][0] == "2019-11-24" and len(summary["days_found"]) == 7


# --------------------------------------------------------------------------- slates


@pytest.fixture(scope="module")
def slate(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("slate")
    log = G.slate_log()
    t0 = int(pd.Timestamp("2026-11-20 08:00", tz="UTC").value // 1000)
    rid = "s" + log["slate"].astype(str)
    exposures = pd.DataFrame(
        {
            "user_id": "u" + (log["slate"] % 37).astype(str),
            "session_id": rid,
            "request_id": rid,
            "item_id": log["item"].astype(str),
            "position": log["position"].astype("int32"),
            "ts": t0 + log["slate"] * 1_000_000,
            "propensity": log["propensity"],
            "list_propensity": log["list_propensity"],
            "prefix_propensity": log["prefix_propensity"],
        }
    )
    clicked = exposures[log["reward"] == 1]
    write_days(root / "in", exposures, clicked[["user_id", "session_id", "request_id", "item_id", "ts"]])
    write_target(root / "target", rid.unique(), G.slate_target())
    return root


def test_the_slate_estimators_equal_obps(spark, slate):
    cfg = load_config(None, [f'ope.target="{slate}/target"'])
    day = dt.date(2026, 11, 20)
    summary = run_ope(spark, cfg, "slate", day, day, str(slate / "in"), str(slate / "out"))
    got = _estimates(slate, "slate")
    for name, want in G.SLATE.items():
        assert got[name]["value"] == pytest.approx(want, abs=1e-9), name
    assert got["iips"]["units"] == 600 and got["iips"]["n"] == 37
    assert any(n.startswith("dm skipped: the target has no q_hat") for n in summary["notes"])
    assert "dr" not in got and "ips" in got


# --------------------------------------------------------------------------- a messy log against the reference

T0 = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.timezone.utc)


def messy_log(seed: int = 11) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Users with several lists, missing propensities, a click on an unshown row, duplicates, an empty
    response, a stochastic candidate with q̂ that misses some logged rows and positions."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(120):
        user = f"u{r % 17}"
        length = int(rng.integers(1, 5))
        items = rng.choice(12, length, replace=False)
        lp = float(rng.uniform(0.01, 0.2))
        for k, item in enumerate(items, start=1):
            p = float(rng.uniform(0.05, 1.0)) if r % 7 else None  # every 7th request logged no propensity
            rows.append((user, f"s{r}", f"r{r}", f"i{item}", k, T0 + dt.timedelta(seconds=r), p, lp, lp * k / 5))
    rows.append(("u1", "s1", "r1", "i0", 9, T0, 0.5, 0.1, 0.1))  # a duplicate of r1/i0 at a later position
    rows.append(("u3", "s999", "r999", None, None, T0, None, None, None))  # an empty response
    columns = ["user_id", "session_id", "request_id", "item_id", "position", "ts", "propensity"]
    exposures = pd.DataFrame(rows, columns=[*columns, "list_propensity", "prefix_propensity"])
    shown = exposures.dropna(subset=["item_id"])
    clicked = shown.sample(frac=0.3, random_state=seed)
    clicks = clicked[["user_id", "session_id", "request_id", "item_id", "ts"]].copy()
    target = []
    for r in range(130):  # 10 requests that were never logged
        for k in range(1, 5):
            probs = rng.dirichlet(np.ones(4)) * (0.8 if k == 4 else 1.0)
            for j, item in enumerate(rng.choice(12, 4, replace=False)):
                target.append((f"r{r}", f"i{item}", k, float(probs[j]), float(rng.uniform(0, 0.5))))
    return (
        exposures,
        clicks,
        pd.DataFrame(target, columns=["request_id", "item_id", "position", "probability", "q_hat"]),
    )


def reference(exposures: pd.DataFrame, clicks: pd.DataFrame, target: pd.DataFrame, clip: float, tau: float):
    """The numpy reference (kernels.ope.user_sums) on the same rows, labelled by hand: deduplicated on
    (user, request, item) keeping the smallest position, reward 1 when a click names the row."""
    shown = exposures.dropna(subset=["item_id"]).sort_values("position")
    shown = shown.drop_duplicates(["user_id", "request_id", "item_id"]).copy()
    keys = set(zip(clicks["request_id"], clicks["item_id"], strict=True))
    shown["y"] = [float((r, i) in keys) for r, i in zip(shown["request_id"], shown["item_id"], strict=True)]
    cand = {(r, i, k): (p, q) for r, i, k, p, q in target.itertuples(index=False)}
    dm_at = (target.assign(pq=target["probability"] * target["q_hat"]).groupby(["request_id", "position"])["pq"]).sum()
    mass_at = target.groupby(["request_id", "position"])["probability"].sum()
    e, q, d, mass = [], [], [], []
    for r, i, k in zip(shown["request_id"], shown["item_id"], shown["position"], strict=True):
        p, qq = cand.get((r, i, k), (0.0, np.nan))
        e.append(p)
        q.append(qq)
        d.append(float(dm_at.get((r, k), 0.0)))
        mass.append(float(mass_at.get((r, k), 0.0)))
    users, per, top = K.user_sums(
        shown["user_id"].to_numpy(),
        shown["request_id"].to_numpy(),
        shown["position"].to_numpy(),
        shown["y"].to_numpy(),
        shown["propensity"].to_numpy(float),
        shown["list_propensity"].to_numpy(float),
        shown["prefix_propensity"].to_numpy(float),
        np.array(e),
        np.array(q),
        np.array(d),
        clip=clip,
        tau=tau,
        mass=np.array(mass),
    )
    return K.RunSums.from_users(per, top)


@pytest.mark.parametrize("clip", [0.0, 3.0])
def test_spark_equals_the_numpy_reference_on_a_messy_log(spark, tmp_path, clip):
    exposures, clicks, target = messy_log()
    for frame in (exposures, clicks):
        frame["ts"] = pd.to_datetime(frame["ts"]).astype("int64") // 1000
    write_days(tmp_path / "in", exposures, clicks)
    spark.createDataFrame(target).write.parquet(str(tmp_path / "target"))
    cfg = load_config(None, [f'ope.target="{tmp_path}/target"', f"ope.clip={clip}", "ope.switch_tau=2"])
    day = dt.date(2026, 11, 20)
    summary = run_ope(spark, cfg, "messy", day, day, str(tmp_path / "in"), str(tmp_path / "out"))
    want = reference(exposures, clicks, target, clip, 2.0)
    rows, _ = K.estimate_all(
        want, {"propensity": True, "q_hat": True, "list_propensity": True, "prefix_propensity": True}
    )
    got = _estimates(tmp_path, "messy")
    for row in rows:
        for column in ("value", "se", "delta", "delta_se"):
            expected, actual = getattr(row, column), got[row.estimator][column]
            if expected is None:
                assert actual is None or np.isnan(actual), (row.estimator, column)
            else:
                assert actual == pytest.approx(expected, rel=1e-9, abs=1e-12), (row.estimator, column)
        assert got[row.estimator]["n"] == row.n and got[row.estimator]["units"] == row.units
        if "clip" in K.ESTIMATORS[row.estimator].parameters and clip:
            assert got[row.estimator]["clip"] == clip
        else:
            assert np.isnan(got[row.estimator]["clip"])
    assert "replay" not in got  # a stochastic candidate
    assert summary["diagnostics"]["max_weight"] == pytest.approx(want.max_weight)
    assert summary["diagnostics"]["mean_target_mass"] == pytest.approx(want.sum("mass") / want.sum("rows"))
    assert any("leaves positions empty" in n for n in summary["notes"])  # 0.8 at every request's position 4
    assert summary["diagnostics"]["rows_without_propensity"] > 0
    assert any("no propensity" in n for n in summary["notes"])


# --------------------------------------------------------------------------- bad input


def _tiny(root, propensity=0.5, probabilities=(0.5, 0.5), with_q=True, with_propensity=True):
    exposures = pd.DataFrame(
        {
            "user_id": ["u1", "u1"],
            "session_id": ["s1", "s1"],
            "request_id": ["r1", "r1"],
            "item_id": ["a", "b"],
            "position": np.array([1, 2], dtype="int32"),
            "ts": [int(T0.timestamp() * 1e6)] * 2,
            "propensity": [propensity, 0.5],
        }
    )
    clicks = exposures[["user_id", "session_id", "request_id", "item_id", "ts"]].iloc[:1]
    if not with_propensity:
        exposures = exposures.drop(columns="propensity")
    write_days(root / "in", exposures, clicks, nan_is_null=False)
    target = pd.DataFrame(
        {
            "request_id": ["r1", "r1", "r1"],
            "item_id": ["a", "b", "b"],
            "position": np.array([1, 1, 2], dtype="int32"),
            "probability": [probabilities[0], probabilities[1], 1.0],
        }
    )
    if with_q:
        target["q_hat"] = [0.1, 0.2, 0.3]
    (root / "target").mkdir()
    target.to_parquet(root / "target" / "part-0.parquet")
    return load_config(None, [f'ope.target="{root}/target"'])


@pytest.mark.parametrize("propensity", [0.0, 1.5, float("nan")])
def test_a_propensity_outside_0_1_is_one_clear_line(spark, tmp_path, propensity):
    cfg = _tiny(tmp_path, propensity=propensity)
    day = dt.date(2026, 11, 20)
    with pytest.raises(SchemaError, match=r"1 logged rows have a propensity outside \(0, 1\]") as err:
        run_ope(spark, cfg, "bad", day, day, str(tmp_path / "in"), str(tmp_path / "out"))
    assert "\n" not in str(err.value) and "request r1, item a, position 1" in str(err.value)
    assert not (tmp_path / "out" / "ope" / "estimates").exists()


def test_a_target_whose_probabilities_sum_above_1_is_one_clear_line(spark, tmp_path):
    cfg = _tiny(tmp_path, probabilities=(0.7, 0.4))
    day = dt.date(2026, 11, 20)
    with pytest.raises(SchemaError, match=r"sum above 1 \(e.g. request r1, position 1: 1.1\)") as err:
        run_ope(spark, cfg, "bad", day, day, str(tmp_path / "in"), str(tmp_path / "out"))
    assert "\n" not in str(err.value)


def test_without_q_hat_the_model_based_estimators_are_skipped_and_the_others_run(spark, tmp_path):
    cfg = _tiny(tmp_path, with_q=False)
    day = dt.date(2026, 11, 20)
    summary = run_ope(spark, cfg, "noq", day, day, str(tmp_path / "in"), str(tmp_path / "out"))
    assert set(summary["estimates"]) >= {"logged", "ips", "snips", "iips"}
    assert not {"dm", "dr", "sndr", "switch_dr"} & set(summary["estimates"])
    assert sum(n.endswith("the target has no q_hat for every row the candidate shows") for n in summary["notes"]) == 4
    # ips: rows (a at 1: e 0.5 / p 0.5 = 1, clicked), (b at 2: 1.0 / 0.5 = 2, not clicked) -> 1 / 2
    assert summary["estimates"]["ips"] == pytest.approx(0.5)


def test_an_empty_target_setting_is_a_config_error_before_anything_runs(spark, tmp_path):
    with pytest.raises(ConfigError, match="ope.target is empty"):
        run_ope(spark, load_config(), "x", dt.date(2026, 11, 20), dt.date(2026, 11, 20), str(tmp_path), str(tmp_path))


def test_the_hand_computed_slate_log_through_spark(spark, tmp_path):
    """tests/kernels/test_ope.py's slate log by hand, end to end: the same values."""
    from helpers.ope_hand import HAND

    t0 = int(T0.timestamp() * 1e6)
    exposures = pd.DataFrame(
        [(u, f"s{r}", r, f"i{r}{k}", k, t0, p, lp, pp) for u, r, k, y, p, lp, pp, e in HAND],
        columns=[
            "user_id",
            "session_id",
            "request_id",
            "item_id",
            "position",
            "ts",
            "propensity",
            "list_propensity",
            "prefix_propensity",
        ],
    )
    rewarded = [row[3] == 1.0 for row in HAND]
    write_days(
        tmp_path / "in", exposures, exposures[rewarded][["user_id", "session_id", "request_id", "item_id", "ts"]]
    )
    target = pd.DataFrame(
        [(r, f"i{r}{k}", k, e) for u, r, k, y, p, lp, pp, e in HAND if e > 0],
        columns=["request_id", "item_id", "position", "probability"],
    )
    target["position"] = target["position"].astype("int32")
    (tmp_path / "target").mkdir()
    target.to_parquet(tmp_path / "target" / "part-0.parquet")
    cfg = load_config(None, [f'ope.target="{tmp_path}/target"'])
    day = dt.date(2026, 11, 20)
    got = run_ope(spark, cfg, "hand", day, day, str(tmp_path / "in"), str(tmp_path / "out"))["estimates"]
    assert got["slate_ips"] == pytest.approx(13 / 3)
    assert got["iips"] == pytest.approx(5.25 / 3)
    assert got["rips"] == pytest.approx(7 / 3)
    assert got["ips"] == pytest.approx(5.25 / 6) and got["snips"] == pytest.approx(5.25 / 9.25)
    assert got["logged_list"] == pytest.approx(4 / 3) and got["logged"] == pytest.approx(4 / 6)


# --------------------------------------------------------------------------- the answer


def _summary_file(root, run: str) -> dict:
    return json.loads((root / "out" / "ope" / "summary" / f"run={run}" / "summary.json").read_text())


def test_the_summary_leads_with_the_recommended_estimate_and_its_reason(obd, obd_runs):
    """The Bernoulli TS candidate on obp's sample: dr, its interval and its difference to the logged policy,
    as the estimates table has them, in summary.json (docs/ope.md, "The recommended estimate")."""
    written = _summary_file(obd, "bts10")
    got = written["recommended"]
    assert got == obd_runs["bts10"]["recommended"]
    assert got["estimator"] == "dr" and got["reason"].startswith("dr: the narrowest interval that agrees")
    row = _estimates(obd, "bts10")["dr"]
    for name in ("value", "ci_low", "ci_high", "delta", "delta_ci_low", "delta_ci_high"):
        assert got[name] == pytest.approx(row[name], rel=1e-12), name
    assert got["ci_low"] <= 0.0042 <= got["ci_high"]  # the policy's own logged CTR
    assert written["status"] == "ok" and "truth" not in written  # no truth.json beside the targets


def test_a_run_over_logs_without_propensities_is_not_ok_and_recommends_nothing(spark, tmp_path):
    """No propensity column: every weighted estimator skipped; the status says no_propensities (the command
    exits 14), nothing is recommended and the reason says why; dm and logged are still written."""
    cfg = _tiny(tmp_path, with_propensity=False)
    day = dt.date(2026, 11, 20)
    summary = run_ope(spark, cfg, "noprop", day, day, str(tmp_path / "in"), str(tmp_path / "out"))
    assert summary["status"] == "no_propensities"
    assert summary["recommended"]["estimator"] is None and summary["recommended"]["value"] is None
    assert "no logged row has a propensity" in summary["recommended"]["reason"]
    assert set(summary["estimates"]) == {"logged", "dm", "logged_list"}
    assert any("status no_propensities" in n for n in summary["notes"])
    assert _summary_file(tmp_path, "noprop")["status"] == "no_propensities"


def test_the_generators_truth_beside_the_candidate_is_in_the_summary(spark, tmp_path):
    """generate --ope writes candidates/NAME/truth.json beside candidates/NAME/target: the summary gains the
    candidate's true value per logged position (and its difference to the logged policy's), per list too."""
    cfg = _tiny(tmp_path)
    truth = {"logged_per_row": 0.05, "candidate_per_row": 0.08, "logged_per_list": 0.5, "candidate_per_list": 0.8}
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    day = dt.date(2026, 11, 20)
    summary = run_ope(spark, cfg, "truth", day, day, str(tmp_path / "in"), str(tmp_path / "out"))
    got = _summary_file(tmp_path, "truth")["truth"]
    assert got == summary["truth"]
    assert got["value"] == 0.08 and got["logged"] == 0.05 and got["delta"] == pytest.approx(0.03)
    assert (got["value_per_list"], got["logged_per_list"]) == (0.8, 0.5)
    assert got["source"] == str(tmp_path / "truth.json")
    assert summary["recommended"]["estimator"] is None  # b at position 1: a choice no logged row shows
    assert "the logs show only 75.0% of the candidate's choices" in summary["recommended"]["reason"]
