"""The input contract as Spark DDL, and the day the Spark tests evaluate: shared by the pipeline tests."""

import datetime as dt

DAY = dt.date(2026, 11, 20)
T0 = dt.datetime(2026, 11, 20, 10, 0)
EXPOSURE_DDL = ("user_id string, session_id string, request_id string, item_id string, position int, "
                "score double, ts timestamp")
CLICK_DDL = "user_id string, session_id string, request_id string, item_id string, ts timestamp"
