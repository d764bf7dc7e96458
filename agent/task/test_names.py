"""A test's name as pytest's JUnit report writes it, and as ``test_cases`` of the metadata holds it.

pytest names a test case by its node id's last part with the parameters put
back whole: the node id is cut at ``[`` before it is split at ``::``, so a
parameter holding ``::`` or ``[`` (an IPv6 address, a URL, a dict's repr) is
never mistaken for a path part. Every reader of test names cuts them the same
way, here.
"""
from __future__ import annotations


def node_and_case(name: str) -> tuple[str, str]:
    """(node path, case) of a test name: ``t.py::C::f[a::b]`` -> (``t.py::C``, ``f[a::b]``); the node path is
    empty for a name as the report writes it (``f[a::b]`` -> ("", ``f[a::b]``))."""
    path, bracket, parameters = name.partition("[")
    node, _, function = path.rpartition("::")
    return node, function + bracket + parameters


def function_of(name: str) -> str:
    """The test function a name runs, without node path or parameters: ``t.py::f[a::b]`` -> ``f``."""
    return node_and_case(name)[1].partition("[")[0]
