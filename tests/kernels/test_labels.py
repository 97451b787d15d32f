"""The labelling kernel: each rule of docs/metrics.md "Labelling" by hand, then the kernel against the Spark
label stage on random days (same rows, same labels, same orphans)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

import numpy as np
import pytest
from helpers.coded_labels import code, random_day, reference

from recsys_spark.kernels.labels import CodedExposures, deduplicate, label

T0 = dt.datetime(2026, 11, 20, 10, 0)
MINUTE_US = 60_000_000
WEIGHTS = {"click": 1.0, "purchase": 3.0}


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def exposure(user, session, request, item, position=1, minutes=0.0, score=0.5):
    return (user, session, request, item, position, score, at(minutes))


def event(user, session, request, item, minutes, name="click", value=None, dwell=None):
    return (user, session, request, item, at(minutes), name, value, dwell)


def run(exposures, events, window_minutes=30, conversions=("purchase",)):
    """{(request, item): (copies, relevance, clicked, n_events, n_clicks, value, dwell, flags)}, orphans."""
    exp, ev = code(exposures, events, WEIGHTS, conversions=conversions)
    out = label(exp, ev, window_minutes * MINUTE_US)
    rows = {}
    for j, i in enumerate(out.kept):
        key = (exposures[i][2], exposures[i][3])
        value = None if math.isnan(out.value[j]) else out.value[j]
        dwell = None if math.isnan(out.dwell[j]) else out.dwell[j]
        rows[key] = (
            int(out.copies[j]),
            float(out.relevance[j]),
            bool(out.clicked[j]),
            int(out.n_events[j]),
            int(out.n_clicks[j]),
            value,
            dwell,
            tuple(bool(f) for f in out.flags[j]),
        )
    return rows, out.orphans


def test_duplicates_keep_the_smallest_position_then_the_earliest_ts_and_count_copies():
    exposures = [
        exposure("u1", "s1", "r1", "a", position=3, minutes=0),
        exposure("u1", "s1", "r1", "a", position=2, minutes=5),
        exposure("u1", "s1", "r1", "a", position=2, minutes=1),
        exposure("u1", "s1", "r1", "b", position=4, minutes=0),
    ]
    exp, ev = code(exposures, [], WEIGHTS)
    out = label(exp, ev, 30 * MINUTE_US)
    assert sorted(out.kept.tolist()) == [2, 3]  # r1/a: position 2 at minute 1; r1/b alone
    assert dict(zip(out.kept.tolist(), out.copies.tolist(), strict=True)) == {2: 3, 3: 1}


def test_an_empty_response_is_one_row_per_request_and_gets_no_event():
    exposures = [exposure("u1", "s1", "r1", None), exposure("u1", "s1", "r1", None, position=2)]
    events = [event("u1", "s1", "r1", None, 1), event("u1", "s1", None, None, 1)]
    rows, orphans = run(exposures, events)
    assert rows == {("r1", None): (2, 0.0, False, 0, 0, None, None, (False,))}
    assert orphans == 2


def test_an_event_with_a_request_goes_to_that_exposure_and_never_falls_back_to_the_session():
    exposures = [exposure("u1", "s1", "r1", "a"), exposure("u1", "s1", "r2", "b", minutes=1)]
    events = [
        event("u1", "s1", "r1", "a", 2),  # attributed by request
        event("u1", "s1", "r1", "b", 2),  # r1 did not show b: an orphan, although r2 did in the session
        event("u2", "s1", "r1", "a", 2),  # another user: an orphan
    ]
    rows, orphans = run(exposures, events)
    assert rows[("r1", "a")][3] == 1 and rows[("r2", "b")][3] == 0
    assert orphans == 2


def test_a_session_event_goes_to_the_latest_exposure_in_its_window_ends_included():
    exposures = [
        exposure("u1", "s1", "r1", "a", minutes=0),
        exposure("u1", "s1", "r2", "a", minutes=10),
        exposure("u1", "s1", "r3", "a", minutes=50),  # after the event: never a candidate
    ]
    events = [
        event("u1", "s1", None, "a", 40),  # r2 at 10 is exactly 30 minutes before: the window's end, included
        event("u1", "s1", None, "a", 10),  # r2 at the event's own ts
        event("u1", "s1", None, "a", 41),  # 31 minutes after r2, 9 before r3: an orphan
    ]
    rows, orphans = run(exposures, events)
    assert rows[("r2", "a")][3] == 2 and rows[("r1", "a")][3] == 0 and rows[("r3", "a")][3] == 0
    assert orphans == 1


def test_the_latest_exposure_wins_whatever_the_order_of_the_input_rows():
    # the later exposure first in the input: the latest in time is chosen, not the last-read row
    exposures = [exposure("u1", "s1", "r4", "a", minutes=5), exposure("u1", "s1", "r9", "a", minutes=0)]
    rows, orphans = run(exposures, [event("u1", "s1", None, "a", 15)])
    assert rows[("r4", "a")][3] == 1 and rows[("r9", "a")][3] == 0
    assert orphans == 0


def test_a_tie_on_ts_goes_to_the_larger_request():
    exposures = [exposure("u1", "s1", "r10", "a", minutes=0), exposure("u1", "s1", "r9", "a", minutes=0)]
    rows, orphans = run(exposures, [event("u1", "s1", None, "a", 5)])
    assert rows[("r9", "a")][3] == 1 and rows[("r10", "a")][3] == 0  # "r9" > "r10" as strings
    assert orphans == 0


def test_session_events_need_the_same_session_and_an_item_and_a_null_session_matches_nothing():
    exposures = [exposure("u1", "s1", "r1", "a"), exposure("u1", None, "r2", "b")]
    events = [event("u1", "s2", None, "a", 1), event("u1", None, None, "b", 1), event("u1", "s1", None, None, 1)]
    rows, orphans = run(exposures, events)
    assert all(row[3] == 0 for row in rows.values())
    assert orphans == 3


def test_identical_session_events_resolve_together_and_all_count():
    exposures = [exposure("u1", "s1", "r1", "a"), exposure("u1", "s1", "r2", "a", minutes=2)]
    events = [event("u1", "s1", None, "a", 3), event("u1", "s1", None, "a", 3, "purchase", 30.0)]
    rows, orphans = run(exposures, events)
    assert rows[("r2", "a")] == (1, 3.0, True, 2, 1, 30.0, None, (True,))
    assert orphans == 0


def test_relevance_is_the_largest_weight_unlisted_events_weigh_zero_and_sums_skip_missing_values():
    exposures = [exposure("u1", "s1", "r1", "a"), exposure("u1", "s1", "r1", "b")]
    events = [
        event("u1", "s1", "r1", "a", 1, "view", dwell=4.0),  # unlisted: weight 0, still attributed
        event("u1", "s1", "r1", "a", 2, "click", dwell=6.0),
        event("u1", "s1", "r1", "a", 3, "purchase", value=0.0),  # a value of 0 is a value
        event("u1", "s1", "r1", "b", 1, "view"),
    ]
    rows, orphans = run(exposures, events)
    assert rows[("r1", "a")] == (1, 3.0, True, 3, 1, 0.0, 10.0, (True,))
    assert rows[("r1", "b")] == (1, 0.0, False, 1, 0, None, None, (False,))
    assert orphans == 0


def test_nothing_in_gives_nothing_out():
    rows, orphans = run([], [])
    assert rows == {} and orphans == 0
    rows, orphans = run([], [event("u1", "s1", "r1", "a", 1), event("u1", "s1", None, "a", 1)])
    assert rows == {} and orphans == 2


def _kernel_rows(exposures, events, window_minutes):
    exp, ev = code(exposures, events, WEIGHTS, conversions=("purchase",))
    out = label(exp, ev, window_minutes * MINUTE_US)
    rows = {}
    for j, i in enumerate(out.kept):
        user, _, request, item, position, _, ts = exposures[i]
        value = None if math.isnan(out.value[j]) else out.value[j]
        dwell = None if math.isnan(out.dwell[j]) else out.dwell[j]
        rows[(user, request, item)] = (
            int(out.copies[j]),
            position,
            ts,
            float(out.relevance[j]),
            bool(out.clicked[j]),
            int(out.n_events[j]),
            int(out.n_clicks[j]),
            value,
            dwell,
            bool(out.flags[j, 0]),
        )
    return rows, out.orphans


@pytest.mark.parametrize("seed", range(20))
def test_the_kernel_agrees_with_the_rules_written_one_event_at_a_time(seed):
    rng = np.random.default_rng(seed)
    exposures, events = random_day(rng, users=int(rng.integers(5, 60)))
    expected = reference(exposures, events, WEIGHTS, dt.timedelta(minutes=20))
    assert _kernel_rows(exposures, events, 20) == expected
    # the same rows in the order the shuffle gives them (sorted by user, request, item, position, ts):
    # the kernel's no-sort path
    ordered = sorted(exposures, key=lambda r: (r[0], r[2], (r[3] is not None, r[3]), r[4], r[6]))
    assert _kernel_rows(ordered, events, 20) == expected


@pytest.mark.parametrize("seed", range(8))
def test_batches_of_whole_user_item_units_label_as_whole_users(seed):
    # the Python pass cuts a heavy user into (user, item) units (steps/label_arrow.py); every rule keys on both,
    # so any split of the day into batches of whole units gives the whole day's labels and orphans
    rng = np.random.default_rng(100 + seed)
    exposures, events = random_day(rng, users=int(rng.integers(5, 40)))
    expected_rows, expected_orphans = reference(exposures, events, WEIGHTS, dt.timedelta(minutes=20))
    units = sorted({(r[0], r[3]) for r in exposures} | {(e[0], e[3]) for e in events}, key=repr)
    batch_of = {unit: int(rng.integers(0, 4)) for unit in units}
    rows, orphans = {}, 0
    for b in range(4):
        got, lost = _kernel_rows(
            [r for r in exposures if batch_of[(r[0], r[3])] == b],
            [e for e in events if batch_of[(e[0], e[3])] == b],
            20,
        )
        rows.update(got)
        orphans += lost
    assert any(len({b for (user, _), b in batch_of.items() if user == u}) > 1 for u, _ in units)  # users were cut
    assert (rows, orphans) == (expected_rows, expected_orphans)


def test_codes_too_wide_to_pack_take_the_sorting_path_with_the_same_labels():
    exposures, events = random_day(np.random.default_rng(7))
    exp, ev = code(exposures, events, WEIGHTS, conversions=("purchase",))
    wide = 2**40  # user x request x item codes no longer fit one int64
    exp_w = dataclasses.replace(exp, user=exp.user * wide, item=exp.item * wide)
    ev_w = dataclasses.replace(ev, user=ev.user * wide, item=np.where(ev.item < 0, -1, ev.item * wide))
    exp_w = dataclasses.replace(exp_w, item=np.where(exp.item < 0, -1, exp_w.item))
    narrow, wider = label(exp, ev, 20 * MINUTE_US), label(exp_w, ev_w, 20 * MINUTE_US)
    assert narrow.orphans == wider.orphans and sum(narrow.n_events) > 20
    np.testing.assert_array_equal(narrow.kept, wider.kept)
    np.testing.assert_array_equal(narrow.n_events, wider.n_events)
    np.testing.assert_array_equal(narrow.relevance, wider.relevance)


@pytest.mark.spark
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_kernel_labels_a_random_day_exactly_as_the_spark_stage(spark, seed):
    from recsys_spark.schema import CLICK_COLUMNS, EXPOSURE_COLUMNS, input_ddl
    from recsys_spark.steps.label import by_user, deduplicate_exposures, join_feedback, label_counts

    exposures, events = random_day(np.random.default_rng(seed))
    exp_df = by_user(spark.createDataFrame(exposures, input_ddl(EXPOSURE_COLUMNS)), 3)
    clk_df = by_user(spark.createDataFrame(events, input_ddl(CLICK_COLUMNS)), 3)
    joined = join_feedback(deduplicate_exposures(exp_df), clk_df, 20.0, WEIGHTS, "click", ("purchase",))
    spark_rows = {
        (r.user_id, r.request_id, r.item_id): (
            r.copies,
            r.position,
            r.ts,
            float(r.relevance),
            r.clicked,
            r.n_events,
            r.n_clicks,
            r.value,
            r.dwell_seconds,
            r._ev_purchase,
        )
        for r in joined.collect()
    }
    spark_orphans = label_counts(joined, len(events))["orphan_events"]

    mine, orphans = _kernel_rows(exposures, events, 20)
    assert len(events) > 50 and spark_orphans > 0 and sum(r[5] for r in mine.values()) > 20  # the day exercises
    assert mine == spark_rows
    assert orphans == spark_orphans


def _lexsorted(columns):
    """Whether the rows are in lexicographic order, the last column first (np.lexsort's convention), by hand."""
    rows = list(zip(*[c.tolist() for c in columns[::-1]], strict=True))
    return all(a <= b for a, b in zip(rows, rows[1:], strict=False))


@pytest.mark.parametrize("seed", range(30))
def test_is_sorted_says_whether_the_rows_are_in_lexsort_order(seed):
    from recsys_spark.kernels.labels import _is_sorted

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 7))
    columns = tuple(rng.integers(-1, 3, n) for _ in range(3))
    if seed % 2:  # half the cases sorted, so that both answers are exercised
        order = np.lexsort(columns)
        columns = tuple(c[order] for c in columns)
    assert _is_sorted(columns) == _lexsorted(columns)


def test_is_sorted_on_ties_and_on_a_later_key_out_of_order():
    from recsys_spark.kernels.labels import _is_sorted

    key = np.array([0, 0, 1, 1])
    assert _is_sorted((np.array([5, 7, 1, 2]), key))  # equal keys, the tie broken in order
    assert not _is_sorted((np.array([7, 5, 1, 2]), key))  # equal keys, the tie out of order
    assert _is_sorted((np.array([9, 0, 9, 0]), np.array([0, 1, 2, 3])))  # the first key decides alone
    assert _is_sorted((np.array([3]), np.array([1]))) and _is_sorted((np.zeros(0), np.zeros(0)))


@pytest.mark.parametrize("wide", [False, True])
def test_factorize_gives_equal_tuples_equal_dense_codes(wide):
    from recsys_spark.kernels.labels import _factorize, _packed

    rng = np.random.default_rng(5)
    scale = 2**40 if wide else 1
    columns = tuple(np.where(rng.random(200) < 0.1, -1, rng.integers(0, 4, 200) * scale) for _ in range(3))
    assert (_packed(*columns) is None) == wide
    codes = _factorize(*columns)
    tuples = list(zip(*[c.tolist() for c in columns], strict=True))
    assert sorted(set(codes.tolist())) == list(range(len(set(tuples))))
    for i in range(0, 200, 7):
        for j in range(0, 200, 11):
            assert (codes[i] == codes[j]) == (tuples[i] == tuples[j])


def test_packed_keeps_the_order_of_the_tuples():
    from recsys_spark.kernels.labels import _packed

    rng = np.random.default_rng(9)
    columns = tuple(rng.integers(-1, 5, 100) for _ in range(3))
    packed = _packed(*columns)
    tuples = list(zip(*[c.tolist() for c in columns], strict=True))
    order = sorted(range(100), key=lambda i: tuples[i])
    assert all(packed[a] <= packed[b] for a, b in zip(order, order[1:], strict=False))
    assert all((packed[i] == packed[j]) == (tuples[i] == tuples[j]) for i in range(0, 100, 3) for j in range(100))


def test_two_users_with_the_same_session_id_item_and_ts_keep_their_own_events():
    exposures = [exposure("u1", "s1", "r1", "a"), exposure("u2", "s1", "r2", "a")]
    rows, orphans = run(exposures, [event("u1", "s1", None, "a", 1), event("u2", "s1", None, "a", 1)])
    assert rows[("r1", "a")][3] == 1 and rows[("r2", "a")][3] == 1
    assert orphans == 0


def test_the_outputs_are_counts_flags_and_indices_not_floats():
    exp, ev = code([exposure("u1", "s1", "r1", "a"), exposure("u1", "s1", "r1", "a", position=2)], [], WEIGHTS)
    out = label(exp, ev, 30 * MINUTE_US)
    assert out.kept.dtype.kind == "i" and out.copies.dtype == np.int64
    assert out.n_events.dtype == np.int64 and out.n_clicks.dtype == np.int64
    assert out.clicked.dtype == bool and out.flags.dtype == bool
    assert out.relevance.dtype == np.float64 and out.value.dtype == np.float64


# Every edge case of docs/metrics.md "Labelling", by hand (issue 44): each expected value is worked out from
# the rule as the docs state it, in the comment beside it.


def test_the_same_request_and_item_under_two_users_is_two_exposures_each_with_its_own_events():
    # rule 1: the key is (user, request, item), so u1's and u2's r1/a are two exposures, one copy each; rule 2:
    # each event goes to its own user's exposure (u1's click, u2's purchase), none to the other user's
    exposures = [exposure("u1", "s1", "r1", "a"), exposure("u2", "s2", "r1", "a")]
    events = [event("u1", "s1", "r1", "a", 1), event("u2", "s2", "r1", "a", 2, "purchase", value=5.0)]
    exp, ev = code(exposures, events, WEIGHTS, conversions=("purchase",))
    out = label(exp, ev, 30 * MINUTE_US)
    assert sorted(out.kept.tolist()) == [0, 1] and out.copies.tolist() == [1, 1]
    by_row = {int(i): j for j, i in enumerate(out.kept)}
    u1, u2 = by_row[0], by_row[1]
    assert (out.relevance[u1], bool(out.clicked[u1]), int(out.n_events[u1])) == (1.0, True, 1)
    assert math.isnan(out.value[u1]) and not out.flags[u1, 0]
    assert (out.relevance[u2], bool(out.clicked[u2]), int(out.n_events[u2])) == (3.0, False, 1)
    assert out.value[u2] == 5.0 and out.flags[u2, 0]
    assert out.orphans == 0


def test_duplicates_tied_on_position_and_ts_keep_the_smallest_rest_of_the_row_which_decides_the_session():
    # rule 1's tie: same position and ts, so the rest of the row decides (min(struct(position, ts, session,
    # score)) in Spark): session "s1" < "s2", the s1 copy is kept (copies 2); a session event then needs s1:
    # the one in s2 is an orphan although a dropped copy was in s2
    exposures = [exposure("u1", "s2", "r1", "a"), exposure("u1", "s1", "r1", "a")]
    events = [event("u1", "s2", None, "a", 1), event("u1", "s1", None, "a", 2)]
    exp, ev = code(exposures, events, WEIGHTS)
    out = label(exp, ev, 30 * MINUTE_US)
    assert out.kept.tolist() == [1] and out.copies.tolist() == [2]
    assert out.n_events.tolist() == [1] and out.orphans == 1
    # same session, scores 0.9 and 0.1: the smaller score is kept
    exposures = [exposure("u1", "s1", "r1", "a", score=0.9), exposure("u1", "s1", "r1", "a", score=0.1)]
    exp, ev = code(exposures, [], WEIGHTS)
    assert label(exp, ev, 30 * MINUTE_US).kept.tolist() == [1]


def test_an_empty_response_with_null_positions_keeps_its_earliest_row_and_stays_apart_from_the_items():
    # an empty response is a null item with a null position; the Python pass codes a null position below every
    # position of the batch (steps/label_arrow.py, Spark's nulls first): two empty rows of r1 tie on position,
    # the earlier ts (minute 1) is kept, copies 2 (their raw positions differ, 1 and 2, so only the null coding
    # makes them tie: on the raw ones the minute-2 row would be kept). r2's row with item a (position 1) is its
    # own exposure, and the empty response of r2 (minute 3) its own one-row group: the null item is a key value
    exposures = [
        exposure("u1", "s1", "r1", None, position=1, minutes=2),
        exposure("u1", "s1", "r1", None, position=2, minutes=1),
        exposure("u1", "s1", "r2", "a", position=1, minutes=3),
        exposure("u1", "s1", "r2", None, minutes=3),
    ]
    events = [
        event("u1", "s1", "r2", "a", 4),  # by request: r2/a
        event("u1", "s1", None, "a", 5),  # by session: r2/a at minute 3 is the only candidate with item a
    ]
    exp, ev = code(exposures, events, WEIGHTS)
    null_position = int(exp.position.min()) - 1
    exp = dataclasses.replace(exp, position=np.where(exp.item == -1, null_position, exp.position))
    out = label(exp, ev, 30 * MINUTE_US)
    got = dict(zip(out.kept.tolist(), zip(out.copies.tolist(), out.n_events.tolist(), strict=True), strict=True))
    assert got == {1: (2, 0), 2: (1, 2), 3: (1, 0)}
    assert out.orphans == 0


def test_an_event_by_request_needs_no_window_and_a_request_never_served_is_an_orphan():
    # rule 2 has no time condition: an event by request 3 hours after its exposure, or one before it, is
    # attributed; an event naming a request never served (r9) is an orphan, even with r1/a in its session
    # and window (no fall-back to the session rule)
    exposures = [exposure("u1", "s1", "r1", "a", minutes=60)]
    events = [
        event("u1", "s1", "r1", "a", 240),
        event("u1", "s1", "r1", "a", 30),
        event("u1", "s1", "r9", "a", 61),
    ]
    rows, orphans = run(exposures, events)
    assert rows[("r1", "a")][3] == 2
    assert orphans == 1


def test_an_event_by_request_goes_to_the_kept_copy_once():
    # three copies of r1/a collapse into one exposure (copies 3); its two events count once each: n_events 2,
    # n_clicks 2 (both clicks), relevance 1
    exposures = [exposure("u1", "s1", "r1", "a", position=p) for p in (3, 1, 2)]
    events = [event("u1", "s1", "r1", "a", 1), event("u1", "s1", "r1", "a", 2)]
    rows, orphans = run(exposures, events)
    assert rows == {("r1", "a"): (3, 1.0, True, 2, 2, None, None, (False,))}
    assert orphans == 0


def test_the_session_rule_reads_the_kept_copy_ts_not_a_dropped_copy():
    # r1/a's copies: position 1 at minute 20 (kept) and position 2 at minute 5 (dropped). A session event at
    # minute 10 has r1/a's kept ts 20 after it: no candidate, an orphan (the dropped copy at 5 does not count).
    # One at minute 25 goes to r1/a (20 lies in [25 - 30, 25])
    exposures = [exposure("u1", "s1", "r1", "a", 1, minutes=20), exposure("u1", "s1", "r1", "a", 2, minutes=5)]
    rows, orphans = run(exposures, [event("u1", "s1", None, "a", 10), event("u1", "s1", None, "a", 25)])
    assert rows[("r1", "a")][:4] == (2, 1.0, True, 1)
    assert orphans == 1


def test_the_window_is_the_configured_one_to_the_microsecond():
    # window 5 minutes: an exposure at minute 0, events at minute 5 (the end, included), at 5 min + 1 us (out),
    # and at minute 0 (the event's own ts, included); window 0: only an exposure at the event's very ts
    exposures = [exposure("u1", "s1", "r1", "a", minutes=0)]
    just_out = T0 + dt.timedelta(minutes=5, microseconds=1)
    events = [
        event("u1", "s1", None, "a", 5),
        ("u1", "s1", None, "a", just_out, "click", None, None),
        event("u1", "s1", None, "a", 0),
    ]
    rows, orphans = run(exposures, events, window_minutes=5)
    assert rows[("r1", "a")][3] == 2 and orphans == 1
    rows, orphans = run(exposures, events, window_minutes=0)
    assert rows[("r1", "a")][3] == 1 and orphans == 2  # only the event at minute 0
    # and one microsecond before the exposure is never a candidate, whatever the window
    before = ("u1", "s1", None, "a", T0 - dt.timedelta(microseconds=1), "click", None, None)
    rows, orphans = run(exposures, [before], window_minutes=30)
    assert rows[("r1", "a")][3] == 0 and orphans == 1


def test_a_tie_on_ts_goes_to_the_larger_request_in_either_input_order_and_only_among_the_latest():
    # r1 and r3 at minute 5, r2 at minute 0 (r2 is not the latest, whatever its request): the event at 10
    # goes to r3 (the larger of the two latest), in both input orders
    exposures = [
        exposure("u1", "s1", "r3", "a", minutes=5),
        exposure("u1", "s1", "r1", "a", minutes=5),
        exposure("u1", "s1", "r2", "a", minutes=0),
    ]
    for rows_in in (exposures, exposures[::-1]):
        rows, orphans = run(rows_in, [event("u1", "s1", None, "a", 10)])
        assert [k for k, row in rows.items() if row[3]] == [("r3", "a")] and orphans == 0


def test_the_latest_exposure_of_each_item_and_session_for_several_groups_at_once():
    # several session groups in one batch, each resolved on its own key: (s1, a) at 12 -> r2/a (minute 10, the
    # latest of r1/a at 0 and r2/a at 10); (s1, b) at 12 -> r1/b (minute 0, the only b); (s2, a) at 12 -> r3/a
    # (s2's a at 11); (s1, a) at 2 -> r1/a (r2/a at 10 comes after it); (s2, b) at 12: no b in s2, an orphan
    exposures = [
        exposure("u1", "s1", "r1", "a", minutes=0),
        exposure("u1", "s1", "r1", "b", minutes=0),
        exposure("u1", "s1", "r2", "a", minutes=10),
        exposure("u1", "s2", "r3", "a", minutes=11),
    ]
    events = [
        event("u1", "s1", None, "a", 12),
        event("u1", "s1", None, "b", 12),
        event("u1", "s2", None, "a", 12),
        event("u1", "s1", None, "a", 2),
        event("u1", "s2", None, "b", 12),
    ]
    rows, orphans = run(exposures, events)
    assert {k: row[3] for k, row in rows.items()} == {("r1", "a"): 1, ("r1", "b"): 1, ("r2", "a"): 1, ("r3", "a"): 1}
    assert orphans == 1


def test_clicks_are_counted_and_a_purchase_alone_is_relevant_but_not_clicked():
    # r1/a: two clicks and a view: relevance 1, clicked, n_events 3, n_clicks 2. r1/b: a purchase alone: relevance
    # 3 (relevant), not clicked, n_clicks 0, its conversion flag set
    exposures = [exposure("u1", "s1", "r1", "a"), exposure("u1", "s1", "r1", "b", position=2)]
    events = [
        event("u1", "s1", "r1", "a", 1),
        event("u1", "s1", None, "a", 2),
        event("u1", "s1", "r1", "a", 3, "view"),
        event("u1", "s1", "r1", "b", 4, "purchase"),
    ]
    rows, orphans = run(exposures, events)
    assert rows[("r1", "a")] == (1, 1.0, True, 3, 2, None, None, (False,))
    assert rows[("r1", "b")] == (1, 3.0, False, 1, 0, None, None, (True,))
    assert orphans == 0


def test_each_conversion_event_has_its_own_flag_weighted_or_not():
    # conversions (purchase, add_to_cart): add_to_cart is not in the weights (weight 0) but still flags its
    # exposure; r1/a has both, r1/b only add_to_cart, r1/c a click only
    exposures = [exposure("u1", "s1", "r1", i, position=p) for p, i in enumerate("abc", 1)]
    events = [
        event("u1", "s1", "r1", "a", 1, "purchase"),
        event("u1", "s1", "r1", "a", 2, "add_to_cart"),
        event("u1", "s1", "r1", "b", 2, "add_to_cart"),
        event("u1", "s1", "r1", "c", 3),
    ]
    rows, orphans = run(exposures, events, conversions=("purchase", "add_to_cart"))
    assert {k: (row[1], row[7]) for k, row in rows.items()} == {
        ("r1", "a"): (3.0, (True, True)),
        ("r1", "b"): (0.0, (False, True)),
        ("r1", "c"): (1.0, (False, False)),
    }
    # no conversion event configured: no flag column at all
    rows, _ = run(exposures, events, conversions=())
    assert all(row[7] == () for row in rows.values())


def test_an_orphan_value_and_dwell_count_nowhere_and_sums_mix_request_and_session_events():
    # r1/a gets value 10 by request and 2.5 by session (sum 12.5) and dwell 7 from the session event only; the
    # orphan (r9, never served) carries value 100 and dwell 50: no exposure's sum holds them
    exposures = [exposure("u1", "s1", "r1", "a")]
    events = [
        event("u1", "s1", "r1", "a", 1, "purchase", value=10.0),
        event("u1", "s1", None, "a", 2, "purchase", value=2.5, dwell=7.0),
        event("u1", "s1", "r9", "a", 3, "purchase", value=100.0, dwell=50.0),
    ]
    rows, orphans = run(exposures, events)
    assert rows[("r1", "a")] == (1, 3.0, False, 2, 0, 12.5, 7.0, (True,))
    assert orphans == 1


def test_a_negative_weight_is_the_relevance_when_it_is_the_only_event_and_none_gives_zero():
    # relevance = the largest weight among the exposure's events: with a configured weight of -1 for "skip",
    # an exposure whose only event is a skip has relevance -1 (its event is attributed); one with a skip and a
    # click has 1; one without events has 0 (not the -inf a max over nothing would give)
    weights = {"click": 1.0, "skip": -1.0}
    exposures = [exposure("u1", "s1", "r1", i, position=p) for p, i in enumerate("abc", 1)]
    events = [
        event("u1", "s1", "r1", "a", 1, "skip"),
        event("u1", "s1", "r1", "b", 1, "skip"),
        event("u1", "s1", "r1", "b", 2),
    ]
    exp, ev = code(exposures, events, weights)
    out = label(exp, ev, 30 * MINUTE_US)
    assert dict(zip(out.kept.tolist(), out.relevance.tolist(), strict=True)) == {0: -1.0, 1: 1.0, 2: 0.0}
    assert out.n_events.tolist() == [1, 2, 0] and out.orphans == 0


def test_a_session_event_whose_key_no_exposure_has_is_an_orphan_among_many_exposures():
    # six exposures of u1 in s1 (items a..f) and one session event for item z: no exposure has (u1, s1, z), so
    # the event is an orphan whatever the others (with over 4 exposures per event the kernel first drops the
    # exposures no event could go to: here all of them); the event for c goes to r1/c
    exposures = [exposure("u1", "s1", "r1", i, position=p) for p, i in enumerate("abcdef", 1)]
    rows, orphans = run(exposures, [event("u1", "s1", None, "z", 1)])
    assert all(row[3] == 0 for row in rows.values()) and orphans == 1
    rows, orphans = run(exposures, [event("u1", "s1", None, "z", 1), event("u1", "s1", None, "c", 1)])
    assert {k for k, row in rows.items() if row[3]} == {("r1", "c")} and orphans == 1


def test_factorize_of_no_row_and_of_one_row():
    from recsys_spark.kernels.labels import _factorize

    none = _factorize(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert none.shape == (0,) and none.dtype == np.int64
    one = _factorize(np.array([3]), np.array([-1]))
    assert one.tolist() == [0] and one.dtype == np.int64


def test_packed_and_is_sorted_are_exact_past_float_precision():
    # codes near 2**30 in two columns: a span of about 2**60, which fits (below 2**62) but is past 2**53, where
    # float64 no longer tells n from n + 1; packing and the sortedness check must stay in integers
    from recsys_spark.kernels.labels import _is_sorted, _packed

    big = 2**30
    columns = (np.array([big, big, big]), np.array([big - 1, big, big - 2]))
    packed = _packed(*columns)
    assert packed is not None and packed.dtype == np.int64
    assert packed[1] - packed[0] == 1 and packed[0] - packed[2] == 1  # one apart, as the last digits are
    assert not _is_sorted((np.zeros(2, dtype=np.int64), np.array([2**60 + 1, 2**60])))  # descending by one
    assert _is_sorted((np.zeros(2, dtype=np.int64), np.array([2**60, 2**60 + 1])))


def test_rows_already_sorted_with_codes_too_wide_to_pack_are_deduplicated():
    # codes too wide to pack take the sorting path even when the rows come sorted: (u, r1, a) twice at
    # positions 1 and 2 (kept: the first, copies 2), then (u, r1, b)
    wide = 2**40
    exp = CodedExposures(
        user=np.array([wide, wide, wide]),
        request=np.array([0, 0, 0]),
        item=np.array([wide, wide, 2 * wide]),
        session=np.zeros(3, dtype=np.int64),
        position=np.array([1, 2, 3]),
        ts=np.zeros(3, dtype=np.int64),
        tiebreak=np.zeros(3, dtype=np.int64),
    )
    kept, copies = deduplicate(exp)
    assert kept.tolist() == [0, 2] and copies.tolist() == [2, 1]
