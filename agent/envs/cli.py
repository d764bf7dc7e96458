"""The environment scripts' backend flag, ``--env-backend NAME`` (the config's ``env-backend``; the old
``--backend`` works with a deprecation note). Defined, like every shared flag, in :mod:`metrics.cli_flags`.
"""
from __future__ import annotations

import argparse

from agent.envs.backends import BACKENDS
from metrics.cli_flags import add_flag


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--env-backend", dest="backend", choices=BACKENDS,
                        help="conda, uv, venv or current (default: RECODE_ENV_BACKEND, else conda if installed, else uv)")
