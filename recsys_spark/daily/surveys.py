"""What users say: the day's optional survey partition (``input.surveys``: ``user_id, question, score``) joined to
the day's users (docs/metrics.md, "Surveys").

Per question q, the metric ``survey_<q>`` (:func:`registry.survey_name`) in each slice: every user of the slice
that answered q that day has its mean score on q (its responses averaged), and the metric is the mean of those
over the responding users, with the t interval of every ``user_avg`` row (the user as the unit).  A user belongs
to the slices of its labelled rows that day (the metric stage's units); a respondent without a labelled row that
day has no slice and is counted, not used.  With the experiments, each listed ``survey_<q>_user_avg`` adds the
user's two sums to ``experiment_users`` (:func:`kernels.user_day.survey_columns`: scores summed, responses), so
that the arms compare the users' means like any per-user metric.

Rows with a null user or question, a question with nothing left after sanitising, or a null, NaN or infinite
score are malformed: counted in the summary, not used.  Spellings of a question that sanitise to one name
(``Satisfaction`` and ``satisfaction ``) are one question, and a note names it.  At most :data:`MAX_QUESTIONS`
questions a day (in name order; the rows of the rest counted as set aside, and noted).  A missing partition is a note,
not an error.  Only what is small reaches the driver: a count per reason, a row per (slice, question).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recsys_spark.config import Config, templates
from recsys_spark.daily.day import Metrics
from recsys_spark.io.read import conform, exists, read_parquet
from recsys_spark.kernels.estimates import t_interval
from recsys_spark.kernels.sums import MeanStats
from recsys_spark.kernels.user_day import survey_columns
from recsys_spark.per_user.aggregate import MetricRow, interval_row
from recsys_spark.registry import SURVEY_PREFIX, parse_key, survey_metric
from recsys_spark.runtime.session import CACHE_LEVEL
from recsys_spark.schema import ALL, SLICE, USER, ColumnSpec

QUESTION, SCORE, NAME = "question", "score", "_metric"
SURVEY_COLUMNS = (ColumnSpec(USER, "id"), ColumnSpec(QUESTION, "string"), ColumnSpec(SCORE, "double"))
#: the most questions a day's survey gives metrics for (a free-text column read as questions stays bounded)
MAX_QUESTIONS = 50


@dataclass
class SurveyResult:
    """The survey metrics' rows, the day sums with the listed survey metrics' columns, the counts and notes."""

    rows: list[MetricRow] = field(default_factory=list)
    day_sums: DataFrame | None = None
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def with_surveys(metrics: Metrics, surveys: SurveyResult) -> Metrics:
    """The metric stage's result with the survey metrics' rows, counts (slice ``all``), notes and day sums."""
    counts = {s: dict(c) for s, c in metrics.unit_counts.items()}
    counts.setdefault(ALL, {}).update(surveys.counts)
    return dataclasses.replace(
        metrics,
        rows=metrics.rows + surveys.rows,
        unit_counts=counts,
        notes=[*metrics.notes, *surveys.notes],
        day_sums=surveys.day_sums,
    )


def question_name(question: Column) -> Column:
    """The Spark form of :func:`registry.survey_name`: ``survey_`` and the sanitised question ('' when nothing is
    left of it)."""
    body = F.regexp_replace(F.regexp_replace(F.lower(question), "[^a-z0-9]+", "_"), "^_+|_+$", "")
    return F.when(body != "", F.concat(F.lit(SURVEY_PREFIX), body)).otherwise(F.lit(""))


def listed_surveys(cfg: Config) -> list[str]:
    """The survey metrics the experiments test (``experiments.metrics`` and the decisions'), by metric name."""
    names = [*cfg.experiments.metrics, *cfg.experiments.decision_metrics()]
    out = [parse_key(n)[0] for n in names if n.startswith(SURVEY_PREFIX)]
    return [m for m in dict.fromkeys(out) if survey_metric(m) is not None]


def with_survey_sums(day_sums: DataFrame, per_user: DataFrame | None, metrics: Sequence[str]) -> DataFrame:
    """``day_sums`` with each survey metric's two per-user sums (0 for a user without a response that day)."""
    if not metrics:
        return day_sums
    columns = [c for m in metrics for c in survey_columns(m)]
    if per_user is None:
        return day_sums.select("*", *[F.lit(0.0).alias(c) for c in columns])
    wanted = per_user.where(F.col(NAME).isin(list(metrics)))
    sums = [F.sum(F.when(F.col(NAME) == m, F.col(part))) for m in metrics for part in ("total", "responses")]
    pivoted = wanted.groupBy(USER).agg(*[s.cast("double").alias(c) for s, c in zip(sums, columns, strict=True)])
    return day_sums.join(pivoted, on=USER, how="left").fillna(0.0, subset=columns)


def _read(spark: SparkSession, cfg: Config, path: str) -> DataFrame:
    raw = conform(read_parquet(spark, path, "surveys", cfg.input.columns), SURVEY_COLUMNS, path)
    score = F.col(SCORE)
    bad_score = score.isNull() | F.isnan(score) | (F.abs(score) == F.lit(float("inf")))
    name = question_name(F.col(QUESTION))
    malformed = F.col(USER).isNull() | F.col(QUESTION).isNull() | bad_score | (name == "")
    return raw.select(USER, QUESTION, SCORE, name.alias(NAME), malformed.alias("_malformed"))


def _questions(rows: DataFrame) -> tuple[list[str], dict[str, int], list[str]]:
    """(the kept metric names, the counts, notes): one small aggregation by name."""
    named = (
        rows.where(~F.col("_malformed"))
        .groupBy(NAME)
        .agg(F.count_distinct(QUESTION).alias("spellings"), F.count(F.lit(1)).alias("rows"))
        .orderBy(NAME)
        .limit(MAX_QUESTIONS + 1)
        .collect()
    )
    kept = [r[NAME] for r in named[:MAX_QUESTIONS]]
    pooled = [r[NAME] for r in named[:MAX_QUESTIONS] if r["spellings"] > 1]
    notes = []
    if pooled:
        notes.append(f"surveys: questions spelt several ways are one question under their sanitised name: {pooled}")
    if len(named) > MAX_QUESTIONS:
        notes.append(
            f"surveys: more than {MAX_QUESTIONS} questions; the first {MAX_QUESTIONS} by name kept, the rest set "
            "aside (survey_rows_set_aside)"
        )
    return kept, {"survey_questions": len(kept)}, notes


@dataclass(frozen=True)
class SurveyInput:
    """The day's survey partition as read (its schema checked: nothing computed yet), or None and a note."""

    rows: DataFrame | None = None
    note: str | None = None


def read_survey(spark: SparkSession, cfg: Config, date: dt.date, input_root: str) -> SurveyInput:
    """The survey partition of ``date`` (``input.surveys``), read before any row of the day is: a column missing or
    of a type that cannot be read is a :class:`~recsys_spark.errors.SchemaError` (exit 5) naming it and the path;
    a partition that does not exist is a note."""
    if not cfg.input.surveys:
        return SurveyInput()
    path = templates.resolve(cfg.input.surveys, input_root, date, "surveys", templates.InputSettings.of(cfg.input))
    if not exists(spark, path):
        return SurveyInput(note=f"no survey partition at {path}: no survey metrics")
    return SurveyInput(_read(spark, cfg, path))


def survey_stage(cfg: Config, survey: SurveyInput, units: DataFrame | None, confidence: float) -> SurveyResult:
    """The day's survey metrics (module docstring) from :func:`read_survey`'s partition.  ``units``: the day's
    per-user sums, one row per (slice, user) with a labelled row (the metric stage's
    :attr:`daily.day.Metrics.day_sums`); returned with the listed survey metrics' sums added."""
    listed = listed_surveys(cfg)
    if survey.rows is None:
        sums = None if units is None or not cfg.input.surveys else with_survey_sums(units, None, listed)
        return SurveyResult(day_sums=units if sums is None else sums, notes=[survey.note] if survey.note else [])
    rows = survey.rows.persist(CACHE_LEVEL)
    try:
        return _measure(rows, units, listed, confidence)
    finally:
        rows.unpersist()


def _measure(rows: DataFrame, units: DataFrame | None, listed: Sequence[str], confidence: float) -> SurveyResult:
    counted = rows.agg(F.count(F.lit(1)).alias("n"), F.count(F.when(F.col("_malformed"), 1)).alias("bad")).first()
    assert counted is not None
    kept, counts, notes = _questions(rows)
    good = rows.where(~F.col("_malformed") & F.col(NAME).isin(kept))
    counts.update(survey_rows=int(counted["n"]), survey_malformed_rows=int(counted["bad"]))
    if len(kept) == MAX_QUESTIONS:
        counts["survey_rows_set_aside"] = int(counted["n"]) - int(counted["bad"]) - good.count()
    per_user = good.groupBy(USER, NAME).agg(F.sum(SCORE).alias("total"), F.count(F.lit(1)).alias("responses"))
    result = SurveyResult(counts=counts, notes=notes)
    if units is None:
        result.notes.append("surveys: the day has no per-user units to join the answers to: no survey metrics")
        return result
    day_users = units.select(SLICE, USER)
    means = per_user.select(USER, NAME, (F.col("total") / F.col("responses")).alias("x"))
    joined = day_users.join(means, on=USER, how="inner")
    stats = joined.groupBy(SLICE, NAME).agg(
        F.count(F.lit(1)).alias("n"), F.avg("x").alias("mean"), F.var_samp("x").alias("var")
    )
    for row in sorted(stats.collect(), key=lambda r: (r[SLICE], r[NAME])):  # slices x questions: small
        n, mean = float(row["n"]), float(row["mean"])
        m2 = float(row["var"]) * (n - 1) if row["var"] is not None else 0.0
        interval = t_interval(MeanStats.from_moments(n, mean, m2), confidence, row[NAME])
        interval = dataclasses.replace(interval, value=mean)  # the mean itself, not n * mean / n
        result.rows.append(interval_row(row[NAME], None, "user_avg", row[SLICE], interval, int(n)))
    outside = per_user.select(USER).distinct().join(day_users.select(USER).distinct(), on=USER, how="left_anti")
    counts["survey_respondents_without_exposures"] = outside.count()
    result.day_sums = with_survey_sums(units, per_user, listed)
    return result
