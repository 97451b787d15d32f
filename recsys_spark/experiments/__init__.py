"""The A/B wing, split by concept as gbstats is; the data flows down this list.

* :mod:`.tables`: the wing's table names and schemas, the checks' rows, every row as its schema's tuple;
* :mod:`.assignments`: reading the assignments, each user's variants, each experiment's ids and layer;
* :mod:`.user_sums`: the per-user day sums (the one pass's, or the JVM's for the users it set aside), the
  ``experiment_users`` table, and reading it back over days;
* :mod:`.covariates`: CUPED's pre-period, each user's sums before it was in the experiment;
* :mod:`.arm_sums`: one aggregation by (experiment, variant, slice): the sufficient statistics;
* :mod:`.checks`: SRM, multiple assignment, compared, the layers' independence, and the rules they make;
* :mod:`.analysis`: the tested metrics, the result rows, the checks and the summary section;
* :mod:`.decisions`: each variant's ship decision;
* :mod:`.stage`: the day's stage (what :mod:`recsys_spark.daily` calls);
* :mod:`.window`: one experiment over a range of days (``recsys-spark experiment``).

The maths is the kernels' (:mod:`recsys_spark.kernels.experiments` and the modules it names).  docs/experiments.md.
"""
