"""The arms' sufficient statistics: one ``groupBy(experiment, variant, slice)`` of the per-user rows gives every
metric's sums over users (n, the sums, the sums of squares and products; with CUPED those of the pre-period
too), named ``f"{metric}|{part}"`` as :mod:`recsys_spark.kernels.experiments` reads them.  Only these small
sums reach the driver.  docs/experiments.md, "How it is computed".
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsys_spark.experiments.tables import COVARIATE_PREFIX, EXPERIMENT, VARIANT, sql_name
from recsys_spark.kernels.experiments import COVARIATE_PARTS
from recsys_spark.kernels.metric_specs import MetricSpec
from recsys_spark.schema import SLICE


def spec_sums(spec: MetricSpec, cuped: bool) -> list[Column]:
    """Aggregations of one metric over the users of a group, named ``f"{spec.name}|{part}"``.

    Written as SQL expressions, one py4j call each (the Column API takes several per column; what that
    costs the driver: docs/performance.md).
    """
    num, den = spec.num_expr(sql_name), spec.den_expr(sql_name)
    has = f"{den} > 0"

    def s(expr: str, part: str, where: str = has) -> Column:
        return F.expr(f"sum(if({where}, {expr}, 0D))").alias(f"{spec.name}|{part}")

    if spec.kind == "ratio":
        out = [
            s("1D", "n"),
            s(num, "x"),
            s(den, "y"),
            s(f"{num} * {num}", "xx"),
            s(f"{den} * {den}", "yy"),
            s(f"{num} * {den}", "xy"),
        ]
        if cuped:  # pre-period numerator u and denominator v, both 0 without pre-period rows or either sum
            cnum, cden = spec.num_expr(sql_name, COVARIATE_PREFIX), spec.den_expr(sql_name, COVARIATE_PREFIX)
            both = f"{cnum} IS NOT NULL AND {cden} IS NOT NULL"
            u, v = f"if({both}, {cnum}, 0D)", f"if({both}, {cden}, 0D)"
            out += [
                s(f"if({v} > 0, 1D, 0D)", "cn"),
                s(u, "u"),
                s(v, "v"),
                s(f"{u} * {u}", "uu"),
                s(f"{v} * {v}", "vv"),
                s(f"{num} * {u}", "xu"),
                s(f"{num} * {v}", "xv"),
                s(f"{den} * {u}", "yu"),
                s(f"{den} * {v}", "yv"),
                s(f"{u} * {v}", "uv"),
            ]
        return out
    y = f"if({den} > 0, try_divide({num}, {den}), NULL)"
    out = [s("1D", "n"), s(y, "x"), s(f"{y} * {y}", "xx")]
    if cuped:
        cnum, cden = spec.num_expr(sql_name, COVARIATE_PREFIX), spec.den_expr(sql_name, COVARIATE_PREFIX)
        x = f"if({cden} > 0, try_divide({cnum}, {cden}), NULL)"
        with_x = f"{has} AND {x} IS NOT NULL"
        exprs = ("1D", y, f"{y} * {y}", x, f"{x} * {x}", f"{x} * {y}")
        out += [s(expr, part, with_x) for expr, part in zip(exprs, COVARIATE_PARTS, strict=True)]
    return out


def arm_sums(rows: DataFrame, specs: Sequence[MetricSpec], cuped: bool) -> dict[tuple[str, str | None, str], dict]:
    """{(experiment, variant, slice): {"users": n, f"{metric}|{part}": sum}}: one aggregation, small collect.

    ``variant`` None collects the users excluded for several variants.
    """
    aggs = [F.count(F.lit(1)).alias("users")] + [a for spec in specs for a in spec_sums(spec, cuped)]
    out = {}
    for row in rows.groupBy(EXPERIMENT, VARIANT, SLICE).agg(*aggs).collect():
        d = row.asDict()
        out[(d.pop(EXPERIMENT), d.pop(VARIANT), d.pop(SLICE))] = d
    return out
