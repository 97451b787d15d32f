"""Pure numpy/pandas metric kernels: no Spark here (a test checks it).

``ranking``: list metrics (NDCG, AP, precision, recall, hit rate, RR), one list
or many at once; ``auc``: exact Mann-Whitney AUC, per group or from score
histograms; ``users``: the per-user batch function the Spark layer calls;
``stats``: sufficient statistics, t/delta/bootstrap intervals, comparisons,
Holm/BH, user-keyed Poisson weights; ``intervals``: the health and business
rows' intervals from per-user sums; ``bootstrap``: per-replicate health metrics.
"""
