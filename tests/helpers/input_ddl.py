"""The input contract as Spark DDL (from recsys_spark.schema), and the day the Spark tests evaluate."""

import datetime as dt

from recsys_spark.schema import CLICK_COLUMNS, EXPOSURE_COLUMNS, input_ddl

DAY = dt.date(2026, 11, 20)
T0 = dt.datetime(2026, 11, 20, 10, 0)
EXPOSURE_DDL = input_ddl(EXPOSURE_COLUMNS)  # with the optional score
CLICK_DDL = input_ddl(CLICK_COLUMNS, optional=False)  # without the optional event: every event is a click
