"""Column names shared by every step (one place, so a rename is one edit)."""

USER = "user_id"
SESSION = "session_id"
REQUEST = "request_id"
ITEM = "item_id"
POSITION = "position"
SCORE = "score"
TS = "ts"
EVENT = "event"
CATEGORY = "category"

#: added by labelling
RELEVANCE = "relevance"
CLICKED = "clicked"
N_EVENTS = "n_events"
COPIES = "copies"

#: added for ranking
LIST_ID = "list_id"
SLICE = "slice"
ALL = "all"

#: added by validation
REASON = "reject_reason"
