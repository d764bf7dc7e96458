#!/bin/bash
source "$(conda info --base)/etc/profile.d/conda.sh"
conda activate recode_sample_numpy
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TARGET_DIR="${SCRIPT_DIR}/ot-domain-adaptation"
cd "${TARGET_DIR}"
cp "${SCRIPT_DIR}/canonical.py" ./canonical.py
cp "${SCRIPT_DIR}/test.py" ./test.py
PYTHONPATH="${TARGET_DIR}" pytest test.py -v --timeout=60
rm -f ./canonical.py ./test.py
