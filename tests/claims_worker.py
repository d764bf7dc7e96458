"""A process using agent/parallel/claims.py, for tests/test_claims.py (run as ``python tests/claims_worker.py MODE ...``).

race FOLDER KEYS...: do every key not yet done, each under its lease: the work appends this pid to
    ``work/<key>`` and marks ``done/<key>``; prints nothing.
hold FOLDER KEY TTL [HOST]: claim KEY (as HOST, to act as a process of another machine), print "held", sleep.
renew FOLDER KEY TTL SECONDS: hold KEY for SECONDS while renewing, then release; prints "lost" if it was lost.
"""
from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.parallel.claims import Claims, Holder  # noqa: E402


def race(folder: Path, keys: list[str]) -> None:
    claims = Claims(folder / "claims", ttl_sec=30)
    todo = list(keys)
    while todo:
        random.shuffle(todo)
        for key in list(todo):
            if (folder / "done" / key).exists():
                todo.remove(key)
                continue
            lease = claims.claim(key)
            if lease is None:
                continue
            with claims.holding(lease):
                if not (folder / "done" / key).exists():
                    with open(folder / "work" / key, "a") as log:
                        log.write(f"{os.getpid()}\n")
                    time.sleep(random.uniform(0, 0.01))
                    (folder / "done" / key).touch()
            todo.remove(key)


def main() -> None:
    mode, folder = sys.argv[1], Path(sys.argv[2])
    if mode == "race":
        race(folder, sys.argv[3:])
        return
    key, ttl = sys.argv[3], float(sys.argv[4])
    if mode == "hold":
        here = Holder.this_process()
        holder = Holder(sys.argv[5], here.boot_id, here.pid, here.start) if len(sys.argv) > 5 else here
        assert Claims(folder, ttl_sec=ttl, holder=holder).claim(key) is not None
        print("held", flush=True)
        time.sleep(3600)
    claims = Claims(folder, ttl_sec=ttl)
    lease = claims.claim(key)
    assert lease is not None
    print("held", flush=True)
    with claims.holding(lease):
        deadline = time.monotonic() + float(sys.argv[5])
        while time.monotonic() < deadline and not lease.lost.is_set():
            time.sleep(0.05)
    print("lost" if lease.lost.is_set() else "released", flush=True)


if __name__ == "__main__":
    main()
