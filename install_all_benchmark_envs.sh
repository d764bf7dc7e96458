#!/usr/bin/env bash
# Build every per-task environment of a dataset (default: work_dir/dataset).
# On the published dataset (requirements_*.txt at its root, test.sh naming
# test_common1 etc.) this builds its eight environments with the release's
# post-install steps: under conda where installed (python 3.10, as the release),
# else with uv. Idempotent and resumable: re-running builds only what is missing
# or failed, precompiles older environments once, and prints "up to date" when
# nothing changed. Arguments pass through to scripts/manage_envs.py, e.g.
#   bash install_all_benchmark_envs.sh --work-dir work_dir   # the folder that contains dataset/
#   bash install_all_benchmark_envs.sh --cpu                 # CPU torch wheels (no GPU on this machine)
#   bash install_all_benchmark_envs.sh --env-backend uv      # uv venvs (default when conda is absent)
#   bash install_all_benchmark_envs.sh --env-backend venv    # python -m venv + pip
#   bash install_all_benchmark_envs.sh --list                # status only
#   bash install_all_benchmark_envs.sh --dry-run             # the commands, nothing run
#   bash install_all_benchmark_envs.sh --task-ids 1,2 --rebuild
# Environments live in work_dir/envs/ (override with --env-dir or RECODE_ENV_DIR);
# each build writes work_dir/envs/<env>/build.log. PYTHON selects the interpreter
# that runs the script.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python3}" "${ROOT}/scripts/manage_envs.py" "$@"
