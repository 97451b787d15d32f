"""The one pass over the user partitions, the per-user table, pooled AUC, aggregates, bootstrap."""
