"""Start pytest from this folder, as its console script would.

Running ``python <this file>`` makes this read-only folder sys.path[0]
instead of the working directory (``python -m pytest`` would put the task's
folder first, where a repository file named like a standard module could
shadow what pytest imports before the guard plugin is loaded).
"""
import sys

import pytest

if __name__ == "__main__":
    sys.exit(pytest.main())
