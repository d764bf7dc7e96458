"""Write or check the documents generated from the configuration's schema (agent/config/schema.py): the
comments of config/default.yaml and the key tables of docs/configuration.md.

    python scripts/config_docs.py           # check: exit 1 naming each file that differs
    python scripts/config_docs.py --write   # rewrite both files from the schema

Exit status: 0 in sync (or written), 1 a file differs from what the schema generates.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.config.docs import default_yaml, with_docs_keys  # noqa: E402

DEFAULT_YAML = REPO / "config" / "default.yaml"
DOCS_PAGE = REPO / "docs" / "configuration.md"


def generated() -> dict[Path, str]:
    """Each generated file and the text the schema gives it."""
    return {DEFAULT_YAML: default_yaml(), DOCS_PAGE: with_docs_keys(DOCS_PAGE.read_text(encoding="utf-8"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the files from the schema")
    args = parser.parse_args(argv)
    stale = [path for path, text in generated().items() if path.read_text(encoding="utf-8") != text]
    if args.write:
        for path in stale:
            path.write_text(generated()[path], encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
        return 0
    for path in stale:
        print(f"{path.relative_to(REPO)} differs from agent/config/schema.py; run python scripts/config_docs.py "
              "--write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
