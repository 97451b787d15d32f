"""The report's sections, one module per wing: ``daily`` (headline, trends, metrics at k, exposure
concentration, slices, data quality and rules), ``experiments`` (a day's experiments and the experiment
windows), ``decisions`` (the ship decisions), ``gate`` (the gates' verdicts), ``offline`` (the offline runs,
their comparisons, offline versus online), ``ope`` (the off-policy estimates) and ``simulation`` (the simulated
lists).  Each section is a function of the loaded :class:`~recsys_spark.report.data.RunData` that returns a
:class:`~recsys_spark.report.parts.Section` (or None when it has nothing to show);
:func:`recsys_spark.report.build.build_sections` puts them in the page's order.
"""
