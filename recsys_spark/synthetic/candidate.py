"""The candidate policy of ``--ope`` and its truth: each item's appeal and the candidate's estimate of it, the
candidate's lists (its best ``CANDIDATE_LENGTH`` of each logged list's items), and the expected click rates of
both policies under the model (known only because the data are made up)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recsys_spark.synthetic.feedback import click_probability
from recsys_spark.synthetic.model import (
    APPEAL_SIGMA,
    CANDIDATE_LENGTH,
    CANDIDATE_NOISE,
    CLICK_INTERCEPT,
    CLICK_NOISE_SIGMA,
    CLICK_SCORE_SLOPE,
    POSITION_BIAS_EXPONENT,
    TRUTH_DRAWS,
    sigmoid,
)
from recsys_spark.synthetic.population import Population
from recsys_spark.synthetic.ranker import Lists
from recsys_spark.synthetic.requests import Requests


@dataclass(frozen=True)
class Candidate:
    """--ope: each item's appeal (its own effect on the click logit) and the candidate's estimate of it."""

    appeal: np.ndarray
    estimate: np.ndarray


def make_candidate(pop: Population, seed: int) -> Candidate:
    """Appeal ~ N(0, APPEAL_SIGMA) per item, estimated with an error ~ N(0, CANDIDATE_NOISE); the stream
    ``(seed, 5)``, so the same for every day."""
    rng = np.random.default_rng([seed, 5])
    appeal = rng.normal(0.0, APPEAL_SIGMA, pop.n_items)
    return Candidate(appeal, appeal + rng.normal(0.0, CANDIDATE_NOISE, pop.n_items))


def candidate_lists(lists: Lists, candidate: Candidate) -> tuple[Lists, np.ndarray]:
    """The candidate's lists: each logged list's items ranked by the candidate's estimated appeal, its best
    ``CANDIDATE_LENGTH`` kept; the score of a row is the logged list's at that position (the request's);
    and q_hat, the candidate's click probability of each row (its model: no user effect, no noise)."""
    shown = np.flatnonzero(lists.shown)
    order = shown[np.lexsort((lists.item[shown], -candidate.estimate[lists.item[shown]], lists.request[shown]))]
    request = lists.request[order]
    first = np.flatnonzero(np.r_[True, request[1:] != request[:-1]])
    rank = np.arange(len(order)) - np.repeat(first, np.diff(np.r_[first, len(order)]))
    keep = rank < CANDIDATE_LENGTH
    request, rank, item = request[keep], rank[keep], lists.item[order][keep]
    start = np.searchsorted(lists.request, request)  # the request's first row (rows are grouped by request)
    score = lists.score[start + rank]
    position = (rank + 1).astype(np.int32)
    logit = np.log(score) - np.log1p(-score)
    q_hat = (
        sigmoid(CLICK_INTERCEPT + CLICK_SCORE_SLOPE * logit + candidate.estimate[item])
        / position**POSITION_BIAS_EXPONENT
    )
    return Lists(request, position, item, score, np.ones(len(request), dtype=bool), 0), q_hat


def expected_clicks(
    rng: np.random.Generator, pop: Population, req: Requests, lists: Lists, appeal: np.ndarray
) -> float:
    """Σ over the shown rows of P(click), averaged over ``TRUTH_DRAWS`` draws of the noise."""
    shown = lists.shown
    total = 0.0
    for _ in range(TRUTH_DRAWS):
        noise = rng.normal(0.0, CLICK_NOISE_SIGMA, len(lists.score))
        total += float(click_probability(pop, req, lists, noise, appeal)[shown].sum())
    return total / TRUTH_DRAWS


def candidate_truth(
    rng: np.random.Generator, pop: Population, req: Requests, lists: Lists, chosen: Lists, appeal: np.ndarray
) -> dict[str, float]:
    """A day's sums for truth.json: the logged rows and lists, and the expected clicks of the logged ``lists``
    and of the candidate's ``chosen`` lists (:func:`expected_clicks`, in that order from ``rng``)."""
    return {
        "logged_rows": float(np.count_nonzero(lists.shown)),
        "lists": float(len(np.unique(lists.request[lists.shown]))),
        "logged_clicks": expected_clicks(rng, pop, req, lists, appeal),
        "candidate_clicks": expected_clicks(rng, pop, req, chosen, appeal),
    }


def write_truth(path: Path, sums: dict[str, float]) -> dict[str, float]:
    """The expected click rates of the logged policy and the candidate under the model, per logged row
    (what ``recsys-spark ope``'s item-level estimators estimate) and per list (the slate estimators')."""
    truth = {
        "logged_per_row": sums["logged_clicks"] / sums["logged_rows"],
        "candidate_per_row": sums["candidate_clicks"] / sums["logged_rows"],
        "logged_per_list": sums["logged_clicks"] / sums["lists"],
        "candidate_per_list": sums["candidate_clicks"] / sums["lists"],
    }
    path.write_text(json.dumps(truth, indent=2) + "\n")
    return truth
