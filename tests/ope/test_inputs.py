"""recsys-spark ope on odd input (issue 40): ids that match no logged request, empty feedback, request ids that
restart each day, rows logged twice, weights whose sums overflow a double.  Each case one line and a documented
exit, or a note and a number that means something (docs/ope.md, "What the run does with odd input")."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from helpers.ope_days import (
    CLICKS,
    DAY1,
    DAY2,
    EXPOSURES,
    day_log,
    empty_clicks,
    estimates,
    ope,
    same_estimates,
    target_rows,
    write,
    write_day,
    write_target,
)

from recsys_spark.errors import EmptyInputError, HardRuleViolation, SchemaError

pytestmark = pytest.mark.spark

# --------------------------------------------------------------------------- ids that match no logged request


def test_a_candidate_whose_ids_match_no_logged_request_fails_naming_an_id_of_each_side(spark, tmp_path):
    """Integer ids against string logs gave IPS = DM = DR = 0 with interval [0, 0], exit 0."""
    exposures, clicks = day_log(DAY2)
    write_day(tmp_path, DAY2, exposures, clicks)
    write_target(tmp_path, target_rows([(r, r) for r in range(24)]), pa.int64())
    with pytest.raises(EmptyInputError, match=r"answers 0 of 24 logged requests") as err:
        ope(spark, tmp_path, DAY2, DAY2)
    assert err.value.exit_code == 7 and "\n" not in str(err.value)
    assert "logged request id 'r0'" in str(err.value) and "candidate request id '0'" in str(err.value)
    assert not (tmp_path / "out" / "ope" / "estimates").exists()


def test_integer_ids_match_their_decimal_strings_but_zero_padded_ones_do_not(spark, tmp_path):
    """Ids are compared as strings, as the experiments compare assignments: 7 is "7" (the same id written
    as a number), never "007" (stripping zeros would merge ids a string system keeps apart)."""
    exposures, clicks = day_log(DAY2, ids=str)
    schema = EXPOSURES.set(EXPOSURES.get_field_index("request_id"), pa.field("request_id", pa.int64()))
    write_day(tmp_path, DAY2, [(*e[:2], int(e[2]), *e[3:]) for e in exposures], None, schema)
    write(tmp_path / "in" / "clicks" / f"dt={DAY2}", clicks, CLICKS)  # string ids in the clicks: "7"
    write_target(tmp_path, target_rows([(r, f"{r:03d}") for r in range(24)]))
    with pytest.raises(EmptyInputError, match=r"answers 0 of 24 .*logged request id '0', candidate request id '000'"):
        ope(spark, tmp_path, DAY2, DAY2, "padded")
    (tmp_path / "target" / "part-0.parquet").unlink()
    write_target(tmp_path, target_rows([(r, str(r)) for r in range(24)]))
    summary = ope(spark, tmp_path, DAY2, DAY2, "plain")
    assert summary["counts"]["matched_requests"] == summary["counts"]["logged_requests"] == 24
    assert summary["estimates"]["ips"] > 0


def test_a_candidate_answering_too_few_logged_requests_fails_and_a_partial_one_gets_a_note(spark, tmp_path):
    exposures, clicks = day_log(DAY2)
    write_day(tmp_path, DAY2, exposures, clicks)
    write_target(tmp_path, target_rows([(r, f"r{r}") for r in range(9)] + [(99, "r99")]))
    too_few = r"answers 9 of 24 logged requests \(37\.5%; ope.min_matched_share is 0\.5\)"
    with pytest.raises(EmptyInputError, match=too_few):
        ope(spark, tmp_path, DAY2, DAY2)
    summary = ope(spark, tmp_path, DAY2, DAY2, "lenient", "ope.min_matched_share=0.3")
    assert summary["counts"]["matched_requests"] == 9 and summary["counts"]["target_requests"] == 10
    assert any(n.startswith("the candidate has no row for 15 of the 24 logged requests") for n in summary["notes"])


# --------------------------------------------------------------------------- days without feedback


@pytest.fixture(scope="module")
def first_day_alone(spark, tmp_path_factory):
    """The estimates of DAY1 alone (its next day's clicks partition absent)."""
    root = tmp_path_factory.mktemp("alone")
    write_day(root, DAY1, *day_log(DAY1))
    write_target(root, target_rows([(r, f"r{r}") for r in range(24)] + [(r, f"q{r}") for r in range(24)]))
    ope(spark, root, DAY1, DAY1)
    return estimates(root)


@pytest.mark.parametrize("kind", ["missing", "empty folder", "untyped", "typed"])
def test_a_day_without_feedback_is_left_out_with_a_note_whatever_its_clicks_partition(
    spark, tmp_path, first_day_alone, kind
):
    """Missing, untyped-empty and typed-empty clicks partitions were three behaviours (a note but the day's
    exposures kept as unclicked; exit 7; silently unclicked): now one, the day left out with a note."""
    write_day(tmp_path, DAY1, *day_log(DAY1))
    write_day(tmp_path, DAY2, day_log(DAY2, ids=lambda r: f"q{r}")[0], None)
    empty_clicks(tmp_path, DAY2, kind)
    write_target(tmp_path, target_rows([(r, f"r{r}") for r in range(24)] + [(r, f"q{r}") for r in range(24)]))
    summary = ope(spark, tmp_path, DAY1, DAY2)
    assert summary["status"] == "ok" and summary["days_found"] == [str(DAY1)]
    assert list(summary["days_without_feedback"]) == [str(DAY2)]
    why = summary["days_without_feedback"][str(DAY2)]
    assert why.startswith("no clicks partition" if kind == "missing" else "0 rows in its clicks partition"), why
    assert any(n.startswith(f"{DAY2}: no feedback (") and "the day is left out" in n for n in summary["notes"])
    same_estimates(estimates(tmp_path), first_day_alone)


def test_an_empty_next_days_clicks_partition_is_no_late_feedback_yet(spark, tmp_path, first_day_alone):
    """The next day's partition, read for late feedback, failed the run (exit 7) when it was a zero-row file of
    untyped columns; absent, it was a note.  Empty is absent: the run is provisional, with a note."""
    write_day(tmp_path, DAY1, *day_log(DAY1))
    empty_clicks(tmp_path, DAY2, "untyped")
    write_target(tmp_path, target_rows([(r, f"r{r}") for r in range(24)] + [(r, f"q{r}") for r in range(24)]))
    summary = ope(spark, tmp_path, DAY1, DAY1)
    same_estimates(estimates(tmp_path), first_day_alone)
    assert any(n.startswith(f"provisional: the clicks partition for {DAY2} is empty") for n in summary["notes"])


def test_a_day_whose_clicks_are_all_set_aside_is_a_day_without_feedback(spark, tmp_path, first_day_alone):
    write_day(tmp_path, DAY1, *day_log(DAY1))
    exposures, clicks = day_log(DAY2, ids=lambda r: f"q{r}")
    write_day(tmp_path, DAY2, exposures, [(*c[:4], c[4] + dt.timedelta(days=3)) for c in clicks])  # not that day
    write_target(tmp_path, target_rows([(r, f"r{r}") for r in range(24)] + [(r, f"q{r}") for r in range(24)]))
    summary = ope(spark, tmp_path, DAY1, DAY2)
    same_estimates(estimates(tmp_path), first_day_alone)
    assert summary["days_without_feedback"][str(DAY2)].startswith(f"0 valid of {len(clicks)} clicks")


@pytest.mark.parametrize("kind", ["missing", "typed"])
def test_a_window_without_any_feedback_fails_as_the_daily_no_feedback_rule(spark, tmp_path, kind):
    """It was `ok` with every estimate 0 or the reward model's alone (DR and SNDR below 0)."""
    for day in (DAY1, DAY2):
        write_day(tmp_path, day, day_log(day, ids=lambda r, d=day: f"{d}-{r}")[0], None)
        empty_clicks(tmp_path, day, kind)
    write_target(tmp_path, target_rows([(r, f"{d}-{r}") for d in (DAY1, DAY2) for r in range(24)]))
    with pytest.raises(HardRuleViolation, match=f"ope: no feedback between {DAY1} and {DAY2}") as err:
        ope(spark, tmp_path, DAY1, DAY2)
    assert err.value.exit_code == 8 and "\n" not in str(err.value)
    assert not (tmp_path / "out" / "ope" / "estimates").exists()


def test_clicks_that_match_no_logged_exposure_are_no_feedback_either(spark, tmp_path):
    exposures, clicks = day_log(DAY2)
    write_day(tmp_path, DAY2, exposures, [(c[0], c[1], c[2], "nowhere", c[4]) for c in clicks])
    write_target(tmp_path, target_rows([(r, f"r{r}") for r in range(24)]))
    with pytest.raises(HardRuleViolation, match=rf"no logged exposure .* got feedback \({len(clicks)} valid clicks"):
        ope(spark, tmp_path, DAY2, DAY2)


# --------------------------------------------------------------------------- ids that restart each day


def two_days(root: Path, ids: Callable[[dt.date, int], str]) -> None:
    """DAY1 and DAY2, the same users, request ids from ``ids(day, r)``."""
    for day in (DAY1, DAY2):
        write_day(root, day, *day_log(day, ids=lambda r, d=day: ids(d, r)))


def test_request_ids_that_restart_each_day_are_refused_without_a_day_in_the_candidate(spark, tmp_path):
    """A daily counter lost rows to the cross-day deduplication and merged lists, with no count."""
    two_days(tmp_path, lambda day, r: str(r))
    write_target(tmp_path, target_rows([(r, str(r)) for r in range(24)]))
    repeated = rf"request id '0' is logged on 2 days \({DAY1} to {DAY2}\), and 23 more ids repeat"
    with pytest.raises(SchemaError, match=repeated) as err:
        ope(spark, tmp_path, DAY1, DAY2)
    assert err.value.exit_code == 5 and "\n" not in str(err.value) and "dt column" in str(err.value)


def test_a_candidate_with_a_day_column_answers_each_days_requests(spark, tmp_path):
    """With ``dt`` in the candidate, the daily counter's lists are each day's own: the same estimates as the
    same days with ids unique across days (and a candidate without a day)."""
    unique = tmp_path / "unique"
    two_days(unique, lambda day, r: f"{day}-{r}")
    write_target(unique, target_rows([(r, f"{d}-{r}") for d in (DAY1, DAY2) for r in range(24)]))
    want = ope(spark, unique, DAY1, DAY2)
    counter = tmp_path / "counter"
    two_days(counter, lambda day, r: str(r))
    rows = [row for d in (DAY1, DAY2) for row in target_rows([(r, str(r)) for r in range(24)], day=d)]
    write_target(counter, rows, with_day=True)
    got = ope(spark, counter, DAY1, DAY2)
    assert got["keyed_by"] == "day and request" and want["keyed_by"] == "request"
    assert got["counts"]["matched_requests"] == got["counts"]["logged_requests"] == 48
    assert got["diagnostics"]["lists"] == want["diagnostics"]["lists"] == 48
    assert got["diagnostics"]["rows"] == want["diagnostics"]["rows"] == 144
    same_estimates(estimates(counter), estimates(unique))


def test_copies_of_a_logged_row_are_counted_and_copies_that_disagree_on_the_propensity_refused(spark, tmp_path):
    exposures, clicks = day_log(DAY2)
    changed = (*exposures[1][:6], 0.125)  # r0's item at position 2 again, with another propensity (0.25 logged)
    write_day(tmp_path, DAY2, [*exposures, changed], clicks)
    write_target(tmp_path, target_rows([(r, f"r{r}") for r in range(24)]))
    with pytest.raises(SchemaError, match=r"request r0, item i2, position 2: propensity 0\.125 and 0\.25\)") as err:
        ope(spark, tmp_path, DAY2, DAY2, "disagree")
    assert err.value.exit_code == 5 and "1 logged rows are logged more than once with different" in str(err.value)
    (tmp_path / "in" / "exposures" / f"dt={DAY2}" / "part-0.parquet").unlink()
    write(tmp_path / "in" / "exposures" / f"dt={DAY2}", exposures + exposures[:2], EXPOSURES)  # r0's first two
    summary = ope(spark, tmp_path, DAY2, DAY2, "copies")
    assert summary["counts"]["duplicate_logged_rows"] == 2 and summary["diagnostics"]["rows"] == 72
    assert any(n.startswith("2 logged rows repeat a (user, request, item) of their day") for n in summary["notes"])


# --------------------------------------------------------------------------- weights whose sums overflow


def test_a_legal_propensity_of_1e_160_gives_no_interval_and_names_the_weight(spark, tmp_path):
    """1/L! for a long list: IPS 3e156 had se 0, an interval of zero width and status ok."""
    exposures, clicks = day_log(DAY2)
    clicked = {(c[2], c[3]) for c in clicks}
    r, item = next((e[2], e[3]) for e in exposures if (e[2], e[3]) in clicked)
    exposures = [(*e[:6], 1e-160) if (e[2], e[3]) == (r, item) else e for e in exposures]
    write_day(tmp_path, DAY2, exposures, clicks)
    write_target(tmp_path, target_rows([(i, f"r{i}") for i in range(24)]))
    summary = ope(spark, tmp_path, DAY2, DAY2)
    got = estimates(tmp_path)
    assert got.loc["ips", "value"] == pytest.approx(0.6 / 1e-160 / 72, rel=0.01)  # one weight dominates
    for name in ("ips", "snips", "dr", "sndr"):
        row = got.loc[name]
        assert all(pd.isna(row[c]) for c in ("se", "ci_low", "ci_high", "delta_se", "delta_ci_low")), name
        assert row["ci_method"] == "none", name
    assert summary["status"] == "overflow"
    assert not pd.isna(got.loc["dm", "se"]) and got.loc["dm", "ci_method"] == "delta"  # dm weighs nothing
    note = next(n for n in summary["notes"] if n.startswith("no interval for"))
    assert "ips" in note and "a sum overflows a double" in note
    assert f"= e 0.6 / propensity 1e-160 (request {r}, item {item}, position" in note
    assert not math.isfinite(0.6 / 1e-160 * 0.6 / 1e-160)  # why: the square of that weight


# --------------------------------------------------------------------------- positions counted from 0


def test_positions_counted_from_0_are_refused_under_base_1_and_read_under_base_0(spark, tmp_path):
    """As the daily job (issue 42): a log whose positions start at 0 lost its top item of every list to the
    set-aside rows with `ok`; under ``input.position_base = 0`` the same log and candidate give the estimates
    of the 1-based ones."""
    exposures, clicks = day_log(DAY2)
    write_day(tmp_path / "one", DAY2, exposures, clicks)
    write_target(tmp_path / "one", target_rows([(r, f"r{r}") for r in range(24)]))
    want = ope(spark, tmp_path / "one", DAY2, DAY2)
    zero = tmp_path / "zero"
    write_day(zero, DAY2, [(*e[:4], e[4] - 1, *e[5:]) for e in exposures], clicks)
    write_target(zero, [(*t[:2], t[2] - 1, *t[3:]) for t in target_rows([(r, f"r{r}") for r in range(24)])])
    with pytest.raises(SchemaError, match=r"column 'position' of the logged exposures .*position 0") as err:
        ope(spark, zero, DAY2, DAY2)
    assert err.value.exit_code == 5 and "\n" not in str(err.value)
    got = ope(spark, zero, DAY2, DAY2, "x", "input.position_base=0")
    assert got["diagnostics"]["rows"] == want["diagnostics"]["rows"] == 72
    same_estimates(estimates(zero), estimates(tmp_path / "one"))
