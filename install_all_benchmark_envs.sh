#!/usr/bin/env bash
# Build every per-task environment of the default dataset (work_dir/dataset).
# Idempotent and resumable: re-running builds only what is missing or failed,
# and prints "up to date" when nothing changed. Arguments pass through to
# scripts/manage_envs.py, e.g.
#   bash install_all_benchmark_envs.sh --backend uv        # uv venvs (default when conda is absent)
#   bash install_all_benchmark_envs.sh --backend conda     # conda envs, python 3.10 like the release
#   bash install_all_benchmark_envs.sh --backend venv      # python -m venv + pip
#   bash install_all_benchmark_envs.sh --list              # status only
#   bash install_all_benchmark_envs.sh --task-ids 1 2 --rebuild
# Backend 'current' uses this interpreter and builds nothing. Environments live
# in work_dir/envs/ (override with --env-dir or RECODE_ENV_DIR); each build
# writes work_dir/envs/<env>/build.log. PYTHON selects the interpreter that runs the script.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python3}" "${ROOT}/scripts/manage_envs.py" --dataset-dir "${ROOT}/work_dir/dataset" "$@"
