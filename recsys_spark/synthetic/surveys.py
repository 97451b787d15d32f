"""A day's survey answers (``surveys/dt=D``: ``user_id, question, score``), drawn from the day's logs: a sample
of the users shown something answers a few questions on a 1-5 scale, and a user who clicked more scores
higher, so that the survey moves with the online metrics (docs/metrics.md, "Surveys").

For each question q with offset o_q, a sampled user u with c_u clicks that day answers

    score = clip(round(2.5 + o_q + 0.6 · log(1 + c_u) + ε), 1, 5),   ε ~ Normal(0, 0.8),

independently per question; a user answers each question with probability :data:`RESPONSE_RATE`.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: the questions and their offsets (the demo's report shows one metric per question)
QUESTIONS = {"Satisfaction": 0.3, "Were the recommendations relevant?": 0.0, "Would you recommend us?": -0.3}
RESPONSE_RATE = 0.08  # of the users shown something that day, per question
SURVEY_SCHEMA = pa.schema([("user_id", pa.string()), ("question", pa.string()), ("score", pa.float64())])


def survey_table(exposures: pa.Table, clicks: pa.Table, day: dt.date, seed: int) -> pa.Table:
    """The day's survey answers (module docstring) from its ``exposures`` and ``clicks`` tables; reproducible
    for a (day, seed)."""
    rng = np.random.default_rng([seed, day.toordinal(), 5])
    shown = pc.unique(exposures.column("user_id").combine_chunks()).to_numpy(zero_copy_only=False)
    shown = np.sort(shown.astype(str))
    clicked = clicks.column("user_id").combine_chunks().to_numpy(zero_copy_only=False).astype(str)
    counts = np.zeros(len(shown))
    where = np.searchsorted(shown, clicked)
    known = (where < len(shown)) & (shown[np.minimum(where, len(shown) - 1)] == clicked)
    np.add.at(counts, where[known], 1.0)
    users, questions, scores = [], [], []
    for question, offset in QUESTIONS.items():
        answers = rng.random(len(shown)) < RESPONSE_RATE
        noise = rng.normal(0.0, 0.8, int(answers.sum()))
        score = np.clip(np.round(2.5 + offset + 0.6 * np.log1p(counts[answers]) + noise), 1, 5)
        users.append(shown[answers])
        questions.append(np.full(int(answers.sum()), question, dtype=object))
        scores.append(score)
    return pa.table(
        {
            "user_id": pa.array(np.concatenate(users).astype(object), pa.string()),
            "question": pa.array(np.concatenate(questions), pa.string()),
            "score": pa.array(np.concatenate(scores), pa.float64()),
        },
        schema=SURVEY_SCHEMA,
    )
