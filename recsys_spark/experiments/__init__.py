"""The A/B wing: the day's stage (per-user sums, checks, analysis, decisions) and the window."""
