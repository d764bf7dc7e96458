"""The pytest plugin the runner loads with ``-p``: only re-exports the hooks of ``recode_guard_core``.

pytest marks every module named with ``-p`` for assertion rewriting (one
more parse, rewrite and compile per run); keeping this one tiny leaves the
guard itself to the normal import machinery.
"""
from recode_guard_core import (
    hide_guard_modules,
    pytest_collection,
    pytest_collection_finish,
    pytest_configure,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
    pytest_sessionfinish,
    pytest_sessionstart,
)

hide_guard_modules()  # the guard's modules are imported: they leave sys.modules before any conftest.py is loaded
del hide_guard_modules  # not a hook, and nothing to call again

__all__ = [  # pytest finds hooks by name on this module
    "pytest_collection",
    "pytest_collection_finish",
    "pytest_configure",
    "pytest_runtest_call",
    "pytest_runtest_setup",
    "pytest_runtest_teardown",
    "pytest_sessionfinish",
    "pytest_sessionstart",
]
