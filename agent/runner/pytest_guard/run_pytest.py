"""Start pytest from this folder, as its console script would.

The runner uses this instead of ``python -m pytest`` when a file of the
task's working directory is named like a module pytest imports at start-up:
``python <this file>`` makes this read-only folder sys.path[0] instead of the
working directory, so nothing of the repository shadows them.
"""
import sys

import pytest

if __name__ == "__main__":
    sys.exit(pytest.main())
