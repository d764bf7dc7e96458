"""Why a job stopped before its end: the names stored in records, state files and job outcomes.

A job that stops early keeps every turn it made. Its LAST stored turn carries
``stop_reason`` (record key, ours) and its ``task_<id>_state.json`` carries the
same ``stop_reason`` next to ``finished: false`` and a one-line ``error``:

* ``feedback_missing``: the turn's feedback could not be produced (the feedback
  model never answered in the schema or failed for good, a feedback file has
  no entry for the turn, a replayed run lacks it and no model can stand in).
  The job's outcome state is ``error``; the next run asks for that feedback
  again and continues.
* ``budget``: ``max-cost-usd`` or ``max-task-cost-usd`` was reached before the
  next turn. The outcome state is ``budget``; a rerun with a higher cap continues.

Such a job is incomplete: neither solved nor unsolved at its level. The
release-typed ``execution_result`` of the stopped turn is its real, unsolved
test result, so the release's metric functions never count it as a success.
"""
from __future__ import annotations

STOP_KEY = "stop_reason"
FEEDBACK_MISSING = "feedback_missing"
BUDGET = "budget"
STOP_REASONS = (FEEDBACK_MISSING, BUDGET)
