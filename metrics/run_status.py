"""The statuses a result record can carry, shared by the harness that writes them and the metrics that read them.

Metrics import nothing of ``agent``, so this vocabulary lives on their side and ``agent`` imports it
(like ``junit_outcome``).

A turn's ``execution_result["status"]`` is the runner's verdict. ``infra_error`` (the harness could not
evaluate the candidate), ``reference_access`` (the candidate used the hidden reference) and ``tampered``
(the candidate used a capability research code never needs, such as a tracer, another frame's locals or a
patch of the test's libraries, or handed the test a value that fakes its comparisons) mean the test result
measures nothing about the candidate: such a job is never counted as solved or unsolved.

Why a job stopped before its end is stored under ``stop_reason`` (``result_format.STOP_KEY``).

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
* ``context_length``, ``invalid_request``, ``responses_unsupported``: the
  provider refuses the job's next request as sent (the prompt is too long for
  the model, the request is invalid, the server has no Responses API). The
  outcome state is ``refused``; the state file keeps, under ``refused``, the
  settings the request was refused under, and a rerun resends it only once one
  of them changed (docs/failures.md).
* ``tampered``: with ``on-tampered: stop`` (the default), the turn whose test
  verdict is ``tampered`` ends the job; later turns are not paid for. The
  outcome state is ``tampered``; reruns leave the job as it is.

Such a job is incomplete: neither solved nor unsolved at its level. The
release-typed ``execution_result`` of the stopped turn is its real, unsolved
test result, so the release's metric functions never count it as a success.
"""
from __future__ import annotations

INFRA_ERROR = "infra_error"
REFERENCE_ACCESS = "reference_access"
TAMPERED = "tampered"
UNTRUSTED_STATUSES = (INFRA_ERROR, REFERENCE_ACCESS, TAMPERED)

FEEDBACK_MISSING = "feedback_missing"
BUDGET = "budget"
REQUEST_REFUSED = ("context_length", "invalid_request", "responses_unsupported")  # RequestFatal reasons
TAMPERED_STOP = TAMPERED  # the stop reason of a job ended by its tampered turn (on-tampered: stop)
