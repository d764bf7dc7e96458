"""Build the guard's compiled helper (``pytest_guard/native/recode_guard_native.c``) for a task's interpreter.

The helper makes the guard's watch cheap (see its source); the guard works
without it, in Python, at more than twice the cost (README, Performance). It is built once per
interpreter ABI and source, next to the source, with the C compiler and the
headers of the interpreter that will load it; parallel runs building it at
once each write their own file and the last rename wins.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "pytest_guard" / "native" / "recode_guard_native.c"
_PROBE = ("import json, sys, sysconfig; print(json.dumps({'include': sysconfig.get_paths()['include'], "
          "'suffix': sysconfig.get_config_var('EXT_SUFFIX'), 'implementation': sys.implementation.name, "
          "'version': list(sys.version_info[:2]), 'cc': sysconfig.get_config_var('CC')}))")
SUPPORTED = ((3, 10), (3, 13))  # the versions whose dicts carry a version tag the helper reads


@functools.lru_cache(maxsize=None)
def build(python: str) -> tuple[str | None, str | None]:
    """(path of the helper built for ``python``, None), or (None, why it could not be built)."""
    try:
        probe = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True)
        facts = json.loads(probe.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return None, f"cannot ask {python} for its headers ({exc})"
    version = tuple(facts["version"])
    if facts["implementation"] != "cpython" or not SUPPORTED[0] <= version <= SUPPORTED[1]:
        return None, f"{facts['implementation']} {version[0]}.{version[1]} is not CPython 3.10-3.13"
    include = facts["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        return None, f"the interpreter's C headers are missing ({include}/Python.h)"
    compiler = _compiler(facts.get("cc"))
    if compiler is None:
        return None, "no C compiler (cc, gcc or clang) on PATH"
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source + include.encode() + facts["suffix"].encode()).hexdigest()[:16]
    target = SOURCE.parent / digest / f"recode_guard_native{facts['suffix']}"
    if target.is_file():
        return str(target), None
    return _build(compiler, include, target)


def _compiler(configured: str | None) -> str | None:
    names = [configured.split()[0]] if configured else []
    return next((path for path in map(shutil.which, names + ["cc", "gcc", "clang"]) if path), None)


def _build(compiler: str, include: str, target: Path) -> tuple[str | None, str | None]:
    partial = target.with_name(f".{secrets.token_hex(8)}{target.name}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", f"-I{include}", str(SOURCE), "-o", str(partial)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if "error" in line] or done.stderr.splitlines()
            return None, f"{compiler} failed: {errors[0].strip() if errors else done.returncode}"
        os.replace(partial, target)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"cannot build it in {target.parent} ({exc})"
    finally:
        partial.unlink(missing_ok=True)
    return str(target), None
