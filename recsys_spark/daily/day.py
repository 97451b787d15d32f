"""The day's types: where its inputs are, what was read and validated, its history, its labelled rows.

Plain containers that every stage of :mod:`recsys_spark.daily` passes along; no computation here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recsys_spark.config import Config, templates
from recsys_spark.per_user.aggregate import MetricRow
from recsys_spark.per_user.curves import PooledCurves
from recsys_spark.per_user.user_pass import UserPass
from recsys_spark.schema import ALL, SLICE
from recsys_spark.steps.dimensions import Activity
from recsys_spark.steps.slices import PopularityCutoffs, SliceInputs
from recsys_spark.tables import check_name


@dataclass(frozen=True)
class InputPaths:
    exposures: str
    clicks: str
    items: str
    users: str

    @classmethod
    def resolve(cls, cfg: Config, input_root: str, date: str) -> InputPaths:
        # {date:%Y%m%d} formats and table:NAME inputs (recsys_spark/config/templates.py)
        options = templates.InputSettings.of(cfg.input)
        return cls(
            *(
                templates.resolve(getattr(cfg.input, kind), input_root, date, kind, options)
                for kind in ("exposures", "clicks", "items", "users")
            )
        )


@dataclass(frozen=True)
class Simulation:
    """A simulated day (``recsys-spark simulate``, docs/ope.md): ``lists`` holds the candidate's list for
    each logged request of the day; the day is evaluated for everything that needs no feedback."""

    run: str
    lists: str

    @classmethod
    def resolve(cls, cfg: Config, run: str, input_root: str, date: str) -> Simulation:
        template = cfg.simulation.lists.replace("{run}", check_name(run, "simulation run"))  # run=NAME/dt=D
        options = templates.InputSettings.of(cfg.input)
        return cls(run, templates.resolve(template, input_root, date, "simulation", options))


@dataclass(frozen=True)
class Inputs:
    """The day's inputs, conformed to the expected columns (nothing read yet: Spark is lazy)."""

    exposures: DataFrame
    clicks: DataFrame
    slices: SliceInputs
    has_score: bool
    items: DataFrame | None = None  # the items table as read (an item may be listed twice)
    simulated: dict[str, int] | None = None  # a simulation's request counts (read_simulated_inputs)


@dataclass(frozen=True)
class History:
    """What the day needs from other days, read once by the read stage; every part is optional.

    ``previous``: distinct (user_id, item_id) exposed the day before (valid rows), or None;
    ``previous_rows``: exposure rows of the day before, or None; ``popularity``: (user_id, item_id)
    of the click events of the ``health.novelty_days`` days before (valid rows), or None when no such
    partition could be read (novelty then uses the day's own clicks); ``late_clicks``: the next day's
    clicks of its first ``attribution.window_minutes`` (late feedback), or None when that partition
    does not exist yet (the day is then *provisional*); ``notes`` say what was missing and why.

    A problem with any of them (missing, empty, corrupt) is a note, never a failure of the day.
    """

    previous: DataFrame | None
    previous_rows: int | None
    popularity: DataFrame | None
    late_clicks: DataFrame | None = None
    provisional: bool = False
    notes: tuple[str, ...] = ()
    activity: Activity | None = None  # the activity slice's history (only when slices.names holds it)


@dataclass(frozen=True)
class Validated:
    """The inputs split into rows to use and rows set aside (with ``reject_reason``), and their counts."""

    exposures: DataFrame
    clicks: DataFrame
    rejected_exposures: DataFrame
    rejected_clicks: DataFrame
    exposure_counts: dict[str, int]  # "rows" and one count per reject reason
    click_counts: dict[str, int]
    unweighted_events: dict[str, int]  # valid events per event name that has no weight
    catalog_conflicts: tuple[int, tuple[str, ...]] = (0, ())  # items listed under several categories, examples

    @property
    def valid_events(self) -> int:
        return _kept(self.click_counts)

    @property
    def valid_exposure_rows(self) -> int:
        return _kept(self.exposure_counts)


def _kept(counts: dict[str, int]) -> int:
    """Rows that passed every check, from the row count and the counts per reason."""
    return counts["rows"] - sum(v for k, v in counts.items() if k != "rows")


@dataclass(frozen=True)
class Day:
    """One day as every stage after validation sees it: its date, paths, inputs, validated rows and history."""

    date: dt.date
    paths: InputPaths
    inputs: Inputs
    valid: Validated
    history: History

    @property
    def iso(self) -> str:
        return self.date.isoformat()


@dataclass(frozen=True)
class Labelled:
    """Exposures joined with their feedback, sliced and partitioned by user (persisted), and the ranking input."""

    labels: dict[str, int]  # label.label_counts
    cutoffs: PopularityCutoffs | None
    by_user: DataFrame  # one row per (exposure, slice), hash-partitioned by user (exploded from ``rows``)
    ranked: DataFrame  # by_user's exposed items with list_id and score (same partitions)
    partitions: int
    #: what labelling persisted: the user partitions (``rows``), the next day's late events that match a
    #: late exposure; with the popularity slice, the item counts its buckets come from (and, for a day with
    #: too many items to broadcast them, a second copy of the rows partitioned by user, with their counts)
    persisted: tuple[DataFrame, ...] = ()
    #: one row per labelled exposure, hash-partitioned by user and persisted (None: ``by_user``'s
    #: ``all`` rows)
    rows: DataFrame | None = None
    #: with slices, ``rows`` before the explode, each row's slice keys as an array (``_slices``): what the
    #: one Python pass reads (one row per exposure crosses to Python, not 1 + S)
    keyed: DataFrame | None = None
    has_score: bool = True  # without a score column, lists are ranked by position

    @property
    def pass_input(self) -> DataFrame:
        """What the one Python pass reads: one row per exposure with its slice keys (``keyed``), or the persisted
        rows without slices (``rows``), or ``by_user`` as given."""
        if self.keyed is not None:
            return self.keyed
        return self.rows if self.rows is not None else self.by_user

    @property
    def exposures(self) -> DataFrame:
        """One row per labelled exposure (the persisted user partitions, or the ``all`` slice of ``by_user``)."""
        return self.rows if self.rows is not None else all_slice(self.by_user)

    def unpersist(self) -> None:
        for df in (self.by_user, *self.persisted):
            df.unpersist()


def all_slice(by_user: DataFrame) -> DataFrame:
    return by_user.where(F.col(SLICE) == ALL)


@dataclass
class Metrics:
    rows: list[MetricRow]
    unit_counts: dict[str, dict[str, int]]  # per slice: users and lists counted or skipped
    notes: list[str]
    buckets: int
    #: the day's one pass over the user partitions, persisted: the health stage reads its sums; the
    #: orchestrator unpersists it
    user_pass: UserPass | None = None
    #: one row per (slice, user) with its day sums, the experiments' input (:mod:`kernels.user_day`)
    day_sums: DataFrame | None = None
    #: the pooled ROC and PR curves per slice (``metrics.curve_points``; None: not drawn)
    curves: PooledCurves | None = None
