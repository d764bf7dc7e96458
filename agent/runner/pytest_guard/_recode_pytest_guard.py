"""The pytest plugin the runner loads with ``-p``: only re-exports the hooks of ``recode_guard_core``.

pytest marks every module named with ``-p`` for assertion rewriting (one
more parse, rewrite and compile per run); keeping this one tiny leaves the
guard itself to the normal import machinery.
"""
from recode_guard_core import (
    pytest_collection,
    pytest_collection_finish,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
    pytest_sessionfinish,
    pytest_sessionstart,
)

__all__ = [  # pytest finds hooks by name on this module
    "pytest_collection",
    "pytest_collection_finish",
    "pytest_runtest_call",
    "pytest_runtest_setup",
    "pytest_runtest_teardown",
    "pytest_sessionfinish",
    "pytest_sessionstart",
]
