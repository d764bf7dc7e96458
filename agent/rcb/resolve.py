"""Ask the package indexes, without installing anything, what can be installed offline.

One ``uv pip compile --no-build`` per question, with the user's pip settings
(indexes, find-links, constraints: see ``agent.envs.backends``). Wheels only:
a distribution that needs a source build (which may download assets or need
a compiler, as dm-meltingpot does) counts as not installable, and the reason
is uv's own explanation. Used at import time, so environments are derived
before anything is built.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from agent.envs.backends import read_pip_settings, require_tool, uv_index_args
from agent.envs.spec import EnvError
from agent.rcb.requirements import TORCH_PAIR, requirement_name

_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


class ResolveError(Exception):
    """The resolver itself could not run (no uv, timeout); one line naming the fix."""


@dataclass(frozen=True)
class Resolution:
    ok: bool
    pinned: dict[str, str]
    reason: str


def _reason(stderr: str) -> str:
    """uv's explanation in one line: its 'Because ...' cause, else its first error line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    cause = next((line for line in lines if "Because" in line), None)
    first = cause or next((line for line in lines if line.lower().startswith(("error", "×"))), "resolution failed")
    return re.sub(r"^(cause:|error:|×)\s*", "", first)[:300]


class Resolver:
    """Wheels-only resolution against the configured indexes for one Python version."""

    def __init__(self, python_version: str, timeout_sec: float = 300.0) -> None:
        try:
            self.uv = require_tool("uv")
        except EnvError as exc:
            raise ResolveError(f"{exc} (or pass --no-resolve to skip the installability check)") from None
        self.python_version = python_version
        self.index_args = uv_index_args(read_pip_settings())
        self.timeout_sec = timeout_sec
        self._memo: dict[tuple[str, ...], Resolution] = {}

    def resolve(self, requirements: list[str] | tuple[str, ...], constraints: dict[str, str]) -> Resolution:
        """Whether ``requirements`` (with ``constraints`` pinned) resolve to wheels, and to which versions."""
        lines = tuple(sorted(requirements)) + tuple(f"{n}=={v}" for n, v in sorted(constraints.items())
                                                     if n in {requirement_name(r) for r in requirements})
        if lines in self._memo:
            return self._memo[lines]
        command = [self.uv, "pip", "compile", "-", "--no-build", "--quiet", "--no-header", "--no-annotate",
                   "--python-version", self.python_version, *self.index_args]
        try:
            done = subprocess.run(command, input="\n".join(lines) + "\n", capture_output=True, text=True,
                                  timeout=self.timeout_sec, check=False)
        except subprocess.TimeoutExpired:
            raise ResolveError(f"resolving {len(lines)} requirement(s) took over {self.timeout_sec:g} s; "
                               "check the package index or pass --no-resolve") from None
        pinned = {m[1].lower(): m[2] for m in map(_PINNED.match, done.stdout.splitlines()) if m}
        result = Resolution(done.returncode == 0, pinned, "" if done.returncode == 0 else _reason(done.stderr))
        self._memo[lines] = result
        return result

    def torch_pair(self) -> dict[str, str]:
        """The newest torch/torchvision pair the indexes offer together (each torchvision pins its torch)."""
        found = self.resolve(list(TORCH_PAIR), {})
        if not found.ok or not all(name in found.pinned for name in TORCH_PAIR):
            raise ResolveError(f"no installable torch/torchvision pair: {found.reason}; pass --torch-pair "
                               "TORCH,TORCHVISION or --no-resolve")
        return {name: found.pinned[name] for name in TORCH_PAIR}

    def unavailable(self, requirements: tuple[str, ...], constraints: dict[str, str]) -> dict[str, str]:
        """Distribution -> reason for each requirement that cannot be installed on its own; {} when all resolve."""
        if self.resolve(requirements, constraints).ok:
            return {}
        bad = {}
        for line in requirements:
            alone = self.resolve((line,), constraints)
            if not alone.ok:
                bad[requirement_name(line) or line] = alone.reason
        return bad

    def shares_cleanly(self, group: tuple[str, ...], paper: tuple[str, ...], constraints: dict[str, str]) -> bool:
        """Whether adding ``paper`` to ``group`` resolves and leaves every version either side gets alone."""
        together = self.resolve(tuple(sorted(set(group) | set(paper))), constraints)
        if not together.ok:
            return False
        for side in (group, paper):
            alone = self.resolve(side, constraints)
            if not alone.ok or any(together.pinned.get(name) != version for name, version in alone.pinned.items()):
                return False
        return True
