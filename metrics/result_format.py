"""The result format, in one place: folder and file names, record keys, the state file's version, and the
one safe way to load a result pickle. The harness writes through it and every metric reads through it.

It imports nothing (not even its metric siblings), so the harness imports it as
``metrics.result_format`` and the metric modules, with only ``metrics`` on
``sys.path`` as notebooks do, as ``result_format``.

Layout of a run (the release's, plus files only we write)::

    <output-dir>/<setting>_<model>_feedback_<type>_guidance_<level>[<suffix>]/
        task_<id>_result.pkl                  list of turn records (builtins only)
        task_<id>_result_replay_level<K>.pkl  the release's replay of this level's turns at level K
        task_<id>_state.json                  ours: finished / error / stop_reason, and FORMAT
        reports/task_<id>_turn_<n>.xml        ours: each submission's JUnit report
    <output-dir>/<init_seed>/<model>_task<id>_init.pkl   turn-0 seed: a list holding one record

Result pickles are loaded with :class:`BuiltinsUnpickler`: a pickle may name any
importable callable (``os.system`` for instance) and ``pickle.load`` calls it
while loading, so a results folder someone sent you could run code on your
machine. Records hold builtins only, so anything that asks for another global
is refused and the file counts as corrupt.
"""
from __future__ import annotations

import io
import pickle
from pathlib import Path

LEVELS = (0, 1, 2, 3, 4)  # the guidance levels L0..L4
MAX_LEVEL = LEVELS[-1]
STATE_FORMAT = 3  # version of task_<id>_state.json; a state without "format" was written before versions
REPORTS_DIR = "reports"

STOP_KEY = "stop_reason"  # set on the last turn (and the state) of a job that stopped early
RELEASE_KEYS = (
    "task_index", "turn_number", "code_input_tokens", "code_output_tokens", "final_code", "agent_memory",
    "code_interaction_history", "execution_result", "feedback_input_token", "feedback_output_token",
    "feedback_interaction_history",
)
OUR_KEYS = (
    "status", "guidance_level", "feedback_items", "feedback_text", "test_digest", "wall_time_sec",
    "code_usage", "feedback_usage", "code_cost_usd", "feedback_cost_usd", "actions",
    "feedback_source", "feedback_error", "token_totals", "feedback_conversation", "code_calls", "protocol",
    STOP_KEY, "answer_stops", "suspicious",
)
NEWER_KEYS = ("answer_stops", "suspicious")  # keys a stored record of an earlier version may lack
RECORD_KEYS = RELEASE_KEYS + OUR_KEYS
TOKEN_KEYS = ("code_input_tokens", "code_output_tokens", "feedback_input_token", "feedback_output_token")

# Globals that plain-builtin pickles may legitimately reference (sets, protocol-2 bytes).
_ALLOWED_GLOBALS = {
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "complex"),
    ("builtins", "bytearray"),
    ("_codecs", "encode"),
}
_PY2_MODULES = {"__builtin__": "builtins"}  # protocol <= 2 pickles spell builtins the Python 2 way


def folder_model_name(model: str) -> str:
    """The model as it appears in folder and seed names: "/" (org/model) replaced by "_"."""
    return model.replace("/", "_")


def run_folder_name(setting: str, model: str, guidance_type: str, level: int, suffix: str = "") -> str:
    """``<setting>_<model>_feedback_<type>_guidance_<level>``; ``suffix`` marks runs whose feedback is not
    the feedback model's (``_replay<K>``, ``_source_file``...), so they never mix with the ordinary run."""
    return f"{setting}_{folder_model_name(model)}_feedback_{guidance_type}_guidance_{level}{suffix}"


def result_file_name(task_id: int, replay_level: int | None = None) -> str:
    """``task_<id>_result.pkl``, or the release's replay file ``task_<id>_result_replay_level<K>.pkl``."""
    return f"task_{task_id}_result" + ("" if replay_level is None else f"_replay_level{replay_level}") + ".pkl"


def state_file_name(task_id: int, replay_level: int | None = None) -> str:
    return result_file_name(task_id, replay_level).replace("_result", "_state", 1).replace(".pkl", ".json")


def result_path(folder: Path, task_id: int) -> Path:
    return Path(folder) / result_file_name(task_id)


def state_path(folder: Path, task_id: int) -> Path:
    return Path(folder) / state_file_name(task_id)


def seed_file_name(model: str, task_id: int, setting: str | None = None) -> str:
    """The release's ``<model>_task<id>_init.pkl``; with ``setting``, the name a second setting's seed takes
    when the release name in the same folder holds another setting's turn 0."""
    return f"{folder_model_name(model)}_task{task_id}" + (f"_{setting}" if setting else "") + "_init.pkl"


class BuiltinsUnpickler(pickle.Unpickler):
    """Unpickler that builds builtin values only and refuses every other global."""

    def find_class(self, module: str, name: str) -> type:
        if (_PY2_MODULES.get(module, module), name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused global {module}.{name} (result pickles may hold builtins only)")


def safe_load_pickle(data: bytes) -> object:
    """Load pickle bytes with :class:`BuiltinsUnpickler`; whatever goes wrong raises an exception, never runs
    code."""
    return BuiltinsUnpickler(io.BytesIO(data)).load()
