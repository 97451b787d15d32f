"""The day's stages after reading: validate, label, metrics, health, rules.

Each takes the day (:class:`~recsys_spark.daily.day.Day`) and plain settings and returns what the next
needs; the orchestrator (:mod:`recsys_spark.daily.run`) times them and stages their tables.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recsys_spark.config import Config
from recsys_spark.daily.day import Day, InputPaths, Inputs, Labelled, Metrics, Validated
from recsys_spark.daily.inputs import SEVERAL_CATEGORIES, catalog_conflicts, catalog_tags, click_events, late_events
from recsys_spark.errors import ConfigError, EmptyInputError
from recsys_spark.experiments.user_sums import user_day_sums, user_values
from recsys_spark.io.output import Output
from recsys_spark.kernels.auc import UPartial
from recsys_spark.kernels.composite import Composite
from recsys_spark.kernels.rules import THRESHOLD_KEYS
from recsys_spark.per_user.aggregate import aggregate_users
from recsys_spark.per_user.bootstrap import auc_bootstrap
from recsys_spark.per_user.curves import PooledCurves, daily_curves
from recsys_spark.per_user.pooled_auc import pooled_auc
from recsys_spark.per_user.table import UserMetrics, bucket_count, persist_user_rows, ranking_input, user_row_columns
from recsys_spark.per_user.user_pass import UserPass
from recsys_spark.runtime import plan_guard
from recsys_spark.runtime.engine import default_parallelism
from recsys_spark.runtime.session import CACHE_LEVEL, fixed_shuffles
from recsys_spark.schema import ALL, DWELL, EVENT, POSITION, TS, USER, VALUE
from recsys_spark.steps.custom_rules import check_rules, evaluate_rules, rule_rows
from recsys_spark.steps.health import HealthInputs, HealthResult, HealthSettings, evaluate_health
from recsys_spark.steps.label import by_user, deduplicate_exposures, join_feedback, label_counts
from recsys_spark.steps.label_arrow import label_in_python
from recsys_spark.steps.rules import RuleResult, scan_rules
from recsys_spark.steps.slices import (
    ITEM_EXPOSURES,
    add_slice_columns,
    catalog_slice_keys,
    explode_slices,
    item_exposure_counts,
    moves_rows,
    popularity_cutoffs,
    slice_input_columns,
    with_item_exposures,
    with_slice_keys,
)
from recsys_spark.steps.validate import (
    Counted,
    click_checks,
    count_inputs,
    day_bounds,
    exposure_checks,
    refuse_zero_positions,
    split_rows,
    tag_rows,
)


def outside_label(spark: SparkSession, cfg: Config, partitions: int) -> contextlib.AbstractContextManager:
    """How validation and the stages after labelling are planned: without adaptive query execution, with
    ``partitions`` shuffle partitions (:func:`session.fixed_shuffles`), unless
    ``execution.adaptive_outside_label`` keeps the session's settings."""
    if cfg.execution.adaptive_outside_label:
        return contextlib.nullcontext()
    return fixed_shuffles(spark, partitions)


def label_planning(spark: SparkSession, cfg: Config, valid: Validated) -> contextlib.AbstractContextManager:
    """How the label stage is planned: with the session's settings (adaptive query execution sizes the
    shuffles that move exposure rows, and turns a small catalog join into a broadcast), except for a day
    that fits one bucket (``execution.rows_per_bucket`` valid rows), where AQE's job per shuffle stage is
    most of the stage's time and there is nothing to re-plan: then as :func:`outside_label`, with the
    day's user-partition count (docs/performance.md, "fixed cost")."""
    if valid.valid_exposure_rows > cfg.execution.rows_per_bucket:
        return contextlib.nullcontext()
    partitions = bucket_count(valid.valid_exposure_rows, cfg.execution.rows_per_bucket, default_parallelism(spark))
    return outside_label(spark, cfg, partitions)


def validate_inputs(spark: SparkSession, inputs: Inputs, cfg: Config, date: dt.date, paths: InputPaths) -> Validated:
    """Tag every row with its first failed check, count rows per reason (one Spark job for the exposures,
    the clicks and the catalog's items under several categories; the clicks' also counts the valid events
    per event name that has no weight), split."""
    bounds = day_bounds(date, cfg.validation.ts_tolerance_minutes, cfg.validation.time_zone)
    zero_position = cfg.input.position_base == 1  # a position 0 refuses the day (counted in the same job)
    exposures = tag_rows(inputs.exposures, exposure_checks(inputs.has_score, bounds, zero_position=zero_position))
    clicks = tag_rows(inputs.clicks, click_checks(bounds, inputs.clicks.columns))
    counted: list[Counted] = [
        (exposures, "exposures partition", paths.exposures, None),
        (
            clicks,
            "clicks partition",
            paths.clicks,
            unweighted_name(clicks, cfg.labels.event_weights, cfg.labels.click_event),
        ),
    ]
    if inputs.items is not None:
        counted.append((catalog_tags(inputs.items), "items", paths.items, None))
    counts = count_inputs(counted)  # one Spark job
    (exposure_counts, _), (click_counts, unweighted) = counts[:2]
    several = counts[2][0].get(SEVERAL_CATEGORIES, 0) if inputs.items is not None else 0
    conflicts = catalog_conflicts(inputs.items, several)
    if exposure_counts["rows"] == 0:
        raise EmptyInputError(f"empty input exposures partition (0 rows): {paths.exposures}")
    if zero_position:
        lists = inputs.simulated is not None  # a simulated day's positions are the candidate's lists'
        source = cfg.input.columns_for("lists" if lists else "exposures").get(POSITION, POSITION)
        what = "the simulated lists (simulation.lists) for the exposures partition" if lists else "exposures partition"
        refuse_zero_positions(exposure_counts, what, paths.exposures, source)
    good_exposures, rejected_exposures = split_rows(exposures)
    good_clicks, rejected_clicks = split_rows(clicks)
    return Validated(
        good_exposures,
        good_clicks,
        rejected_exposures,
        rejected_clicks,
        exposure_counts,
        click_counts,
        unweighted,
        conflicts,
    )


def unweighted_name(clicks: DataFrame, weights: Mapping[str, float], click_event: str) -> Column:
    """The event's name when it has no weight (a row without ``event`` is a ``click_event``), else null."""
    event = F.coalesce(F.col(EVENT), F.lit(click_event)) if EVENT in clicks.columns else F.lit(click_event)
    return F.when(~event.isin(list(weights)), event)


def labelled_exposures(
    exposures: DataFrame,
    clicks: DataFrame,
    partitions: int,
    cfg: Config,
    with_slices: Callable[[DataFrame], DataFrame],
) -> DataFrame:
    """The valid exposures deduplicated, with their slice columns (``with_slices``) and their events attributed,
    hash-partitioned by user: by the Spark chain of :mod:`recsys_spark.steps.label` or, with
    ``execution.labelling = "python"``, by the numpy kernel in one pass (:mod:`recsys_spark.steps.label_arrow`);
    the same rows either way (the slice columns are row-wise joins on user and item, so they may come before or
    after the labels).

    On the python path the slice columns are joined before the one shuffle, so the pass's output is every user
    whole in one partition as it stands (a ``mapInArrow`` moves no row) but Spark does not know it: the caller
    persists it without a second shuffle (:func:`in_place`), and what reads it must not rely on Spark's knowledge
    of the partitioning (an aggregation is right whatever it is; a Python pass over the partitions reads them as
    they physically are)."""
    labels = cfg.labels
    if cfg.execution.labelling == "python":
        return label_in_python(
            with_slices(exposures),
            clicks,
            partitions,
            cfg.attribution.window_minutes,
            labels.event_weights,
            labels.click_event,
            labels.conversion_events,
        )
    return by_user(
        join_feedback(
            deduplicate_exposures(by_user(exposures, partitions)).transform(with_slices),
            by_user(clicks, partitions),
            cfg.attribution.window_minutes,
            labels.event_weights,
            labels.click_event,
            labels.conversion_events,
        ),
        partitions,
    )


def in_place(cfg: Config) -> bool:
    """Whether the labelled rows are in user partitions that Spark does not know of (the python path): a
    step that would move them stays without a ``by_user`` on top (it would shuffle every row again)."""
    return cfg.execution.labelling == "python"


def label_day(spark: SparkSession, day: Day, cfg: Config) -> Labelled:
    """Partition exposures and clicks by user, deduplicate, attach slice columns, attribute feedback,
    persisted: the one shuffle of exposure rows (:mod:`recsys_spark.steps.label`), whose partitions the counts
    here, the metrics, the health indicators and the rules all read in place.  ``by_user`` explodes the
    slices from those persisted rows as each stage reads them (one cached row per exposure, not 1 + S).

    Only those partitions are kept: the orphan events are counted from the valid events (see
    :func:`label.label_counts`).  The popularity slice's count per item is summed from them and broadcast
    back to them when Spark's broadcast threshold allows (the rows do not move); otherwise the rows are
    joined by item and persisted partitioned by user a second time (:func:`slices.moves_rows`).
    """
    inputs, valid = day.inputs, day.valid
    window = cfg.attribution.window_minutes
    clicks = valid.clicks
    late, n_late = late_events(day, window, cfg.validation.time_zone), 0  # None without a next-day partition
    if late is not None:
        late = late.persist(CACHE_LEVEL)
        n_late = late.count()
        # the day's own clicks decide which optional columns (value, dwell) the day has
        clicks = clicks.unionByName(
            late.select(*[c for c in late.columns if c in clicks.columns]), allowMissingColumns=True
        )
    # the valid rows (before deduplication) bound the exposures; the Python pass reads one row per
    # exposure whatever the slices (their keys as an array), so the slices do not add partitions
    partitions = bucket_count(valid.valid_exposure_rows, cfg.execution.rows_per_bucket, default_parallelism(spark))

    def with_slices(rows: DataFrame) -> DataFrame:
        return add_slice_columns(rows, inputs.slices, day.date, cfg.slices.new_user_days, day.history.activity)

    joined = labelled_exposures(valid.exposures, clicks, partitions, cfg, with_slices)
    # persisted one row per exposure, with the slice dimensions' values as columns: the slices are
    # exploded as each stage reads the rows (a narrow step, the partitioning kept), not cached S+1 times
    dims = inputs.slices.dims
    user_rows = persist_user_rows(joined, [*slice_input_columns(dims), *rule_columns(inputs, cfg)])
    labels = label_counts(user_rows, valid.valid_events + n_late)  # builds the user partitions
    labels["late_events"] = n_late
    cutoffs, rows, kept = None, user_rows, [late]
    if "popularity" in dims.names:  # the day's count per item, from the persisted rows; its bucket on every row
        counts = item_exposure_counts(user_rows).persist(CACHE_LEVEL)
        cutoffs = popularity_cutoffs(counts, cfg.slices.popularity_head_share, cfg.slices.popularity_tail_share)
        kept.append(counts)
        # Spark broadcasts the counts when their real size allows (the rows stay where they are, by_user is
        # dropped as redundant, or left out on the python path, where Spark would not see it is); when it joins
        # by item instead, the rows are persisted back in user partitions
        rows = with_item_exposures(user_rows, counts)
        if moves_rows(rows):
            rows = persist_user_rows(by_user(rows, partitions), [ITEM_EXPOSURES, *user_rows.columns])
            kept.append(rows)
        elif not in_place(cfg):
            rows = by_user(rows, partitions)
    sliced = explode_slices(rows, dims, cutoffs)
    # the one Python pass reads one row per exposure with its slice keys (each distinct set of rows scored once)
    keyed = with_slice_keys(rows, dims, cutoffs) if dims.names else None
    return Labelled(
        labels,
        cutoffs,
        sliced,
        ranking_input(sliced, cfg.ranking.list_unit, inputs.has_score),
        partitions,
        tuple(df for df in (*kept, user_rows) if df is not None),
        user_rows,
        keyed,
        inputs.has_score,
    )


def metric_stage(
    labelled: Labelled, cfg: Config, out: Output, health: bool = True, composites: Sequence[Composite] = ()
) -> Metrics:
    """The day's one Python pass over the user partitions (:class:`user_pass.UserPass`: the per-user values,
    and with ``health`` the health stage's sums), the per-user table staged as ``user_metrics``, then every
    aggregate from the pass's sums; ``composites`` (scales resolved: :func:`per_user.composite.resolve`) are
    computed in the same pass."""
    ks = cfg.metrics.k
    the_pass = UserPass(
        labelled.pass_input,
        ks,
        gain=cfg.metrics.ndcg_gain,
        list_unit=cfg.ranking.list_unit,
        has_score=labelled.has_score,
        min_list_length=cfg.health.min_list_length if health else None,
        max_user_rows=cfg.execution.max_user_rows,
        day_sums=health,
        composites=composites,
        f_alphas=cfg.metrics.f_alphas,
    )
    users = UserMetrics(
        labelled.ranked,
        ks,
        cfg.metrics.ndcg_gain,
        None,
        cfg.execution.max_user_rows,
        cfg.execution.rows_per_bucket,
        cfg.ranking.list_unit,
        user_pass=the_pass,
        composites=composites,
        f_alphas=cfg.metrics.f_alphas,
    )
    staged_users = out.stage("user_metrics", users.frame)  # runs the one pass over the labelled exposures
    heavy = users.heavy_frame()  # users past execution.max_user_rows, if any: bounded path
    day_sums = the_pass.day_frame() if the_pass.day_columns else None
    if heavy is not None:
        heavy.write.mode("append").parquet(staged_users)
        if day_sums is not None:  # the set-aside users' day sums on the JVM side (their rows stay in Spark)
            aside = labelled.by_user.where(F.col(USER).isin(sorted(users.set_aside)))
            day_sums = day_sums.unionByName(user_day_sums(aside, user_values(heavy, ks, composites)))
    # one row per exposure with its slice keys (sorted once, whatever the slices), as the pass reads them
    pooled, curves = pooled_stage(labelled, cfg)
    replicates = (
        auc_bootstrap(labelled.ranked, cfg.stats.bootstrap_replicates, cfg.stats.seed)
        if cfg.stats.bootstrap_replicates
        else None
    )
    rows, unit_counts = aggregate_users(
        users.moments(),
        ks,
        pooled,
        cfg.stats.confidence,  # sums from the pass
        replicates,
        [c.name for c in composites],
        cfg.metrics.f_alphas,
    )
    unit_counts.setdefault(ALL, {}).update(users.counts())
    notes = users.notes() + (curves.notes if curves is not None else [])
    if cfg.metrics.curve_points and not labelled.has_score:
        notes.append("roc_curve and pr_curve not written: the exposures have no score column")
    return Metrics(rows, unit_counts, notes, labelled.partitions, the_pass, day_sums, curves)


def pooled_stage(labelled: Labelled, cfg: Config) -> tuple[dict[str, UPartial], PooledCurves | None]:
    """The pooled AUC per slice and, with ``metrics.curve_points`` and a score column, the ROC and PR curves
    from the same sorted stream (:mod:`recsys_spark.per_user.curves`)."""
    ranked = ranking_input(labelled.pass_input, cfg.ranking.list_unit, labelled.has_score)
    if not (cfg.metrics.curve_points and labelled.has_score):
        return pooled_auc(ranked), None
    curves = daily_curves(ranked, cfg.metrics.curve_points)
    return {key[0]: part for key, part in curves.auc.items()}, curves


def run_metric_stage(labelled: DataFrame, cfg: Config, out: Output, rows: int, has_score: bool = True) -> Metrics:
    """The metric stage on labelled exposures built outside :func:`evaluate_day` (the benchmark's entry).

    ``labelled``: one row per labelled exposure (:func:`label.join_feedback`, optionally with a
    ``slice`` column), ``rows`` about how many (it sizes the user partitions). Partitions them by user (the
    one shuffle), runs :func:`metric_stage` (``user_metrics`` staged in ``out``; the caller commits or
    aborts ``out``) and unpersists the partitions.
    """
    spark = labelled.sparkSession
    partitions = bucket_count(rows, cfg.execution.rows_per_bucket, default_parallelism(spark))
    user_rows = persist_user_rows(by_user(labelled, partitions))
    ranked = ranking_input(user_rows, cfg.ranking.list_unit, has_score)
    metrics = None
    try:
        with outside_label(spark, cfg, partitions):
            metrics = metric_stage(
                Labelled({}, None, user_rows, ranked, partitions, has_score=has_score), cfg, out, health=False
            )
            return metrics
    finally:
        user_rows.unpersist()
        if metrics is not None and metrics.user_pass is not None:
            metrics.user_pass.unpersist()


def health_stage(spark: SparkSession, labelled: Labelled, day: Day, cfg: Config, metrics: Metrics) -> HealthResult:
    """Health and business indicators per slice, from the sums of the metric stage's pass (``metrics``), with
    the previous day (update rate) and the clicks of the last ``health.novelty_days`` days (novelty) when
    they exist."""
    history = day.history
    popularity = (
        history.popularity
        if history.popularity is not None
        else click_events([day.valid.clicks], cfg.labels.click_event)
    )
    inputs = HealthInputs(
        day.inputs.slices.dims,
        day.inputs.slices.catalog,
        items_path=day.paths.items,
        popularity=popularity,
        previous=history.previous,
        seen=history.popularity,  # the earlier days' clicks only: the same day's are not "before"
        cutoffs=labelled.cutoffs,
        keyed=labelled.keyed,
        user_pass=metrics.user_pass,
        catalog_keys=catalog_slice_keys(day.inputs.slices, day.date),
    )
    health = evaluate_health(labelled.by_user, inputs, health_settings(cfg))
    if history.popularity is None:
        health.notes.append("novel_item_share and novel_category_share skipped: no clicks of earlier days")
    clicks = day.valid.clicks.columns
    if VALUE not in clicks:
        health.notes.append(
            "gmv_per_exposure, gmv_per_request, gmv_per_user and value_per_converting_user skipped: the clicks "
            "have no value column"
        )
    if DWELL not in clicks:
        health.notes.append("dwell_per_click and dwell_per_user skipped: the clicks have no dwell_seconds column")
    if labelled.cutoffs is not None:
        health.info.update(popularity_head_min=labelled.cutoffs.head_min, popularity_tail_max=labelled.cutoffs.tail_max)
    health.notes += list(history.notes)
    return health


def health_settings(cfg: Config) -> HealthSettings:
    """The health stage's settings from the config (``health.*``, ``stats.*``, ``execution.*``)."""
    return HealthSettings(
        min_list_length=cfg.health.min_list_length,
        lorenz_points=cfg.health.lorenz_points,
        confidence=cfg.stats.confidence,
        bootstrap_replicates=cfg.stats.bootstrap_replicates,
        seed=cfg.stats.seed,
        max_user_rows=cfg.execution.max_user_rows,
        rows_per_bucket=cfg.execution.rows_per_bucket,
        click_cap=cfg.metrics.click_cap,
    )


def rule_columns(inputs: Inputs, cfg: Config) -> list[str]:
    """The labelled rows' columns the custom rules and the experiments' populations read besides the others' (the
    exposure's ts, the kept input columns); none without custom rules or populations."""
    if not cfg.rules.custom and not cfg.experiments.populations():
        return []
    return [TS, *inputs.slices.kept.internal().values()]


def labelled_plan(inputs: Inputs, cfg: Config, date: dt.date) -> DataFrame:
    """The day's labelled rows as a plan over the inputs, without validation or partitioning (nothing runs):
    the columns, with their types, that :func:`label_day` persists."""
    deduplicated = deduplicate_exposures(inputs.exposures).transform(
        add_slice_columns, inputs.slices, date, cfg.slices.new_user_days
    )
    joined = join_feedback(
        deduplicated,
        inputs.clicks,
        cfg.attribution.window_minutes,
        cfg.labels.event_weights,
        cfg.labels.click_event,
        cfg.labels.conversion_events,
    )
    return user_row_columns(joined, [*slice_input_columns(inputs.slices.dims), *rule_columns(inputs, cfg)])


def check_custom_rules(spark: SparkSession, inputs: Inputs, cfg: Config, date: dt.date) -> None:
    """Analyse the custom rules' expressions against the day's columns before anything is computed
    (:func:`custom_rules.check_rules`): a rule Spark cannot evaluate is a :class:`ConfigError` (exit 3)
    naming it and why.  Reads no row: the schema of a plan over the inputs is analysis only."""
    if not cfg.rules.custom:
        return
    kept = inputs.slices.kept.internal()
    rows = rule_rows(labelled_plan(inputs, cfg, date), date, kept, inputs.slices.catalog is not None)
    check_rules(spark, cfg.rules.custom, rows.schema)


def check_populations(spark: SparkSession, inputs: Inputs, cfg: Config, date: dt.date) -> None:
    """Analyse each experiment's population against the day's columns before any row is read (on an empty frame of
    the labelled rows' schema: analysis only): Spark's refusal, a result that is not a boolean, or (on a classic
    session) an analysed plan outside :mod:`recsys_spark.runtime.plan_guard`'s allow-list is a :class:`ConfigError`
    (exit 3) naming the key.  The grammar (:mod:`recsys_spark.config.sql_guard`) and the columns were checked
    before (config load, :func:`recsys_spark.steps.slices.check_population_columns`)."""
    populations = cfg.experiments.populations()
    if not populations:
        return
    plan = labelled_plan(inputs, cfg, date)
    named = plan.select(*[F.col(internal).alias(name) for name, internal in inputs.slices.kept.internal().items()])
    empty = spark.createDataFrame([], named.schema)
    for name, condition in populations.items():
        where = f"config key experiments.per_experiment.{name}.population"
        try:
            checked = empty.select(F.expr(f"({condition})").alias("p"))
            kind = checked.schema["p"].dataType
            if plan_guard.is_available(checked):
                plan_guard.check_analysed(checked, empty)
        except AnalysisException as exc:
            reason = re.sub(r"\s*SQLSTATE: \w+\.?;?", "", (str(exc).strip().splitlines() or [""])[0]).strip()
            raise ConfigError(f"{where}: Spark cannot evaluate it: {reason}: {condition!r}") from None
        except plan_guard.UnsafePlan as exc:
            raise ConfigError(f"{where}: {exc} (Spark's analysed plan): {condition!r}") from None
        if not isinstance(kind, (T.BooleanType, T.NullType)):
            raise ConfigError(
                f"{where}: a population is a condition (a boolean), got {kind.simpleString()}: {condition!r}"
            )


def rules_stage(
    labelled: Labelled,
    day: Day,
    cfg: Config,
    output_root: str = "",
    click_counts: Mapping[str, int] | None = None,
) -> list[RuleResult]:
    """Every business rule that applies (see :mod:`recsys_spark.steps.rules`), then the custom ones
    (:mod:`recsys_spark.steps.custom_rules`; a baseline rule reads the earlier days' ``rule_checks`` under
    ``output_root``).  ``click_counts``: the health stage's counts of the ``click_concentration`` rule
    (:attr:`HealthResult.rule_counts`; None or empty: that rule is left out)."""
    valid = day.valid
    exposure_reasons = {k: v for k, v in valid.exposure_counts.items() if k != "rows"}
    click_reasons = {k: v for k, v in valid.click_counts.items() if k != "rows"}
    counts = {
        "exposure_rows": valid.exposure_counts["rows"],
        "bad_score": valid.exposure_counts.get("bad_score", 0),
        "valid_events": valid.valid_events,
        "click_rows": valid.click_counts["rows"],
        "rejected_exposures": sum(exposure_reasons.values()),
        "rejected_clicks": sum(click_reasons.values()),
        **labelled.labels,
    }
    return scan_rules(
        labelled.exposures,
        counts,
        has_catalog=day.inputs.slices.catalog is not None,
        has_score=day.inputs.has_score,
        blacklist_items=cfg.rules.blacklist_items,
        blacklist_categories=cfg.rules.blacklist_categories,
        bot_requests_per_user=cfg.rules.bot_requests_per_user,
        thresholds=threshold_settings(cfg),
        previous_exposure_rows=day.history.previous_rows,
        rejected_exposures=valid.rejected_exposures,
        exposure_reasons=exposure_reasons,
        click_reasons=click_reasons,
        unweighted_events=dict(valid.unweighted_events),
        click_counts=click_counts or None,
    ) + evaluate_rules(
        labelled.exposures.sparkSession,
        labelled.exposures,
        cfg.rules.custom,
        date=day.date,
        kept=day.inputs.slices.kept.internal(),
        has_catalog=day.inputs.slices.catalog is not None,
        output_root=output_root,
        baseline_days=cfg.rules.baseline_days,
        baseline_sigmas=cfg.rules.baseline_sigmas,
        baseline_min_days=cfg.rules.baseline_min_days,
    )


def threshold_settings(cfg: Config) -> dict[str, float]:
    """The built-in soft rules' thresholds, by the config keys their table names (:data:`kernels.rules.BUILT_IN`)."""
    return {key: getattr(cfg.rules, key) for key in THRESHOLD_KEYS}
