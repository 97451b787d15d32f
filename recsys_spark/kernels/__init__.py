"""Pure numpy/pandas metric kernels: no Spark here (a test checks it).

``ranking``: list metrics (NDCG, AP, precision, recall, hit rate, RR), one list
or many at once; ``auc``: exact Mann-Whitney AUC, per group or from score
histograms; ``users``: the per-user batch function the Spark layer calls;
the statistics, one module per concept as gbstats splits them: ``sums``
(sufficient statistics), ``estimates`` (t/delta/bootstrap intervals),
``comparisons`` (Welch, ratio, paired t, Holm/BH), ``sequential`` (the
confidence sequence), ``bootstrap_weights`` (user-keyed Poisson weights),
``quantiles`` (scipy's t and normal); ``intervals``: the health and business
rows' intervals from per-user sums; ``bootstrap``: per-replicate health metrics;
the experiments' ``experiments`` (the result rows from the arms' sums),
``assignment_checks`` (SRM, layers), ``cuped``, ``power`` and ``metric_specs``.
"""
