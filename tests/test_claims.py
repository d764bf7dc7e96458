"""Leases on a shared folder (agent/parallel/claims.py) with real processes: racing processes do each key exactly
once, a SIGKILLed holder's key is taken over (at once on this machine, after expiry from another), and a live
holder that renews never loses its lease."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agent.parallel.claims import Claims, Holder, key_folder

WORKER = Path(__file__).with_name("claims_worker.py")


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(WORKER), *map(str, args)], stdout=subprocess.PIPE, text=True)


def held(process: subprocess.Popen) -> None:
    assert process.stdout.readline().strip() == "held"


def test_racing_processes_do_each_key_exactly_once(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "done").mkdir()
    keys = [f"model_x_guidance_{n % 5}__task_{n}" for n in range(40)]
    racers = [start("race", tmp_path, *keys) for _ in range(6)]
    for racer in racers:
        assert racer.wait(timeout=120) == 0
    counts = {key: len((tmp_path / "work" / key).read_text().split()) for key in keys}
    assert counts == {key: 1 for key in keys}
    doers = {pid for key in keys for pid in (tmp_path / "work" / key).read_text().split()}
    assert len(doers) > 1, "one racer did everything: no race happened"


def test_a_killed_holder_on_this_machine_is_taken_over_at_once(tmp_path: Path) -> None:
    holder = start("hold", tmp_path, "job", 3600)
    held(holder)
    claims = Claims(tmp_path, ttl_sec=3600)
    assert claims.claim("job") is None
    assert claims.holder_of("job")["holder"]["pid"] == holder.pid
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    lease = claims.claim("job")
    assert lease is not None and claims.holder_of("job")["token"] == lease.token


def test_a_killed_holder_on_another_machine_is_taken_over_after_expiry(tmp_path: Path) -> None:
    ttl = 2.0
    holder = start("hold", tmp_path, "job", ttl, "another-machine")
    held(holder)
    claimed_at = time.monotonic()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    claims = Claims(tmp_path, ttl_sec=ttl)
    while (lease := claims.claim("job")) is None:
        time.sleep(0.05)
    waited = time.monotonic() - claimed_at
    assert ttl - 0.5 < waited < ttl + 2.0, waited
    generations = sorted(p.name for p in (tmp_path / key_folder("job")).iterdir())
    assert generations == ["000000000002"] and lease.path.name == "000000000002"


def test_a_renewing_holder_never_loses_its_lease(tmp_path: Path) -> None:
    ttl = 1.5
    holder = start("renew", tmp_path, "job", ttl, 5)
    held(holder)
    remote = Claims(tmp_path, ttl_sec=ttl, holder=Holder("another-machine", "boot", 1, "1"))
    attempts, taken = 0, None
    while taken is None and holder.poll() is None:
        taken = remote.claim("job")
        attempts += 1
        time.sleep(0.02)
    assert holder.communicate(timeout=30)[0].strip() == "released"  # "lost" had a claim got in before
    assert attempts > 50
    assert taken is not None or remote.claim("job") is not None


def test_a_release_lets_the_next_claim_in_and_a_stale_renewal_is_refused(tmp_path: Path) -> None:
    claims = Claims(tmp_path, ttl_sec=60)
    first = claims.claim("job")
    assert first is not None and claims.claim("job") is None
    claims.release(first)
    second = claims.claim("job")
    assert second is not None and second.path.name == "000000000002"
    assert claims.renew(first) is False and first.lost.is_set()
    assert claims.renew(second) is True


def test_a_damaged_generation_file_holds_until_it_expires(tmp_path: Path) -> None:
    claims = Claims(tmp_path, ttl_sec=0.5)
    lease = claims.claim("job")
    lease.path.write_text("")  # a holder whose record was lost: only its heartbeat tells
    assert claims.claim("job") is None
    time.sleep(0.7)
    taken = claims.claim("job")
    assert taken is not None and taken.path.name == "000000000002"
