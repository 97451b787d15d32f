"""Pure numpy/pandas metric kernels: no Spark here (a test checks it).

``ranking``: list metrics (NDCG, AP, precision, recall, hit rate, RR), one list
or many at once; ``auc``: exact Mann-Whitney AUC, per group or from score
histograms; ``users``: the per-user batch function the Spark layer calls.
"""
