"""The environment scripts' own flag, ``--backend NAME`` (alias ``--env-backend``).

The flags every command shares (``--task-ids``, ``--dataset-dir``, ``--work-dir``)
are defined once in :mod:`metrics.cli_flags`.
"""
from __future__ import annotations

import argparse

from agent.envs.backends import BACKENDS


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", "--env-backend", dest="backend", choices=BACKENDS,
                        help="conda, uv, venv or current (default: RECODE_ENV_BACKEND, else conda if installed, else uv)")
