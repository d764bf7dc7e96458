"""The pytest plugin the runner loads with ``-p``: only re-exports the hooks of ``recode_guard_core``.

pytest rewrites the assertions of every module named with ``-p``, which costs
a parse and compile of the whole module on each run; keeping the plugin
module this small leaves the guard itself to the normal (cached) import.
"""
from recode_guard_core import (  # noqa: F401  (pytest finds hooks by name)
    pytest_collection_finish,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
    pytest_sessionfinish,
    pytest_sessionstart,
)
