"""--parallel-mode ray on a real two-node cluster on this host (``ray start --head`` and ``ray start --address``,
token authentication on, each node with its own loopback address, temporary folder and custom resource):
a driver with the token joins it, jobs run on both nodes, killing the worker node mid-run loses no job and
duplicates none (the records equal a sequential run's); a wrong token is refused in one line."""
from __future__ import annotations

import importlib.util
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.runner.processes import session_members
from agent.run.scheduler import run_job
from tests.run_support import (
    SOLVE_AT, STANDARD_RUN, cli_env, reference_results, results, start_cli, write_config, write_scripts,
)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None or shutil.which("ray") is None,
                                reason="ray not installed (optional extra)")
HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"  # loopback addresses Ray does not rewrite to the host's
PLACED = re.compile(r"^recode: (\w+)\((.*)\) on Ray node ([0-9a-f]+)$", re.M)


@dataclass
class Cluster:
    address: str
    token: str
    env: dict[str, str]
    folders: dict[str, Path]  # node name -> its Ray temporary folder
    sessions: dict[str, int]  # node name -> session id of its `ray start` (every process of the node)

    def placements(self) -> list[tuple[str, str, str, str]]:
        """(node name, job function, job words, node id) of every job started, from the nodes' worker logs."""
        found = []
        for name, folder in self.folders.items():
            for log in folder.glob("session_latest/logs/worker-*.out"):
                found += [(name, *match) for match in PLACED.findall(log.read_text(errors="replace"))]
        return found

    def kill(self, name: str) -> None:
        for pid in session_members(self.sessions.pop(name)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def ray_start(env: dict[str, str], folder: Path, ip: str, *args: str) -> int:
    """``ray start`` in its own session, so the node's processes can be found (and ended) by session id."""
    ports = {flag: str(free_port(ip)) for flag in ("--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
                                                   "--runtime-env-agent-port", "--metrics-export-port")}
    argv = ["ray", "start", *args, "--temp-dir", str(folder), "--node-ip-address", ip, "--num-cpus", "1",
            "--disable-usage-stats", *[item for pair in ports.items() for item in pair]]
    started = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    output = started.communicate(timeout=180)[0]
    assert started.returncode == 0, output
    return started.pid


@pytest.fixture(scope="module")
def cluster():
    root = Path(tempfile.mkdtemp(prefix="rayc-", dir="/tmp"))  # short: Ray's socket paths live below it
    token = secrets.token_hex(32)
    env = {**cli_env(), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}
    port = free_port(HEAD_IP)
    made = Cluster(f"{HEAD_IP}:{port}", token, env, {"head": root / "head", "worker": root / "worker"}, {})
    try:
        made.sessions["head"] = ray_start(env, made.folders["head"], HEAD_IP, "--head", "--port", str(port),
                                          "--include-dashboard", "false", "--resources", '{"head_node": 1}')
        made.sessions["worker"] = ray_start(env, made.folders["worker"], WORKER_IP, "--address", made.address,
                                            "--resources", '{"worker_node": 1}')
        yield made
    finally:
        for name in list(made.sessions):
            made.kill(name)
        shutil.rmtree(root, ignore_errors=True)


def driver_env(home: Path, **keys: str) -> dict[str, str]:
    """The main command's environment: no Ray settings of ours but ``keys``, and a home (``home``) without a token."""
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), **keys}


@pytest.fixture(autouse=True)
def no_auth_mode_of_ours(monkeypatch) -> None:
    """A local ray.init() in this process (other tests) sets RAY_AUTH_MODE here: the drivers must not inherit it."""
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)


@pytest.mark.slow
def test_a_wrong_or_missing_token_is_named_in_one_line(cluster: Cluster, tmp_path: Path) -> None:
    scripts = write_scripts(tmp_path / "scripts", SOLVE_AT)
    config = write_config(tmp_path / "run.yaml", scripts, tmp_path / "out",
                          **{**STANDARD_RUN, "parallel-mode": "ray", "ray-address": cluster.address})
    fix = ("set RAY_AUTH_TOKEN to the cluster's token (`ray get-auth-token` on its head node prints it) or "
           "RAY_AUTH_TOKEN_PATH to a file holding it")
    refused = f"error: the Ray cluster at {cluster.address} refused this driver's authentication token: {fix}"
    for keys, expected in (({"RAY_AUTH_TOKEN": secrets.token_hex(32)}, refused), ({}, refused),
                           ({"RAY_AUTH_MODE": "token"},
                            f"error: RAY_AUTH_MODE=token but no Ray authentication token is at hand: {fix}")):
        main = start_cli(config, env=driver_env(tmp_path / "home", **keys))
        stdout, stderr = main.communicate(timeout=180)
        assert main.returncode == 2, stdout + stderr
        assert stderr.strip() == expected


@pytest.mark.slow
def test_an_unreachable_cluster_is_named_as_such(tmp_path: Path) -> None:
    address = f"{HEAD_IP}:{free_port(HEAD_IP)}"  # nothing listens there
    scripts = write_scripts(tmp_path / "scripts", SOLVE_AT)
    config = write_config(tmp_path / "run.yaml", scripts, tmp_path / "out",
                          **{**STANDARD_RUN, "parallel-mode": "ray", "ray-address": address})
    main = start_cli(config, env=driver_env(tmp_path / "home"))
    _, stderr = main.communicate(timeout=300)
    assert main.returncode == 2, stderr
    [line] = stderr.strip().splitlines()
    assert line.startswith(f"error: could not reach the Ray cluster at {address}: ") and line.endswith(
        "; check ray-address (`ray status` on its head node prints it)"), line


@pytest.mark.slow
def test_jobs_run_on_both_nodes_and_a_lost_node_loses_no_job(cluster: Cluster, tmp_path: Path,
                                                             tmp_path_factory) -> None:
    reference = reference_results(tmp_path_factory.getbasetemp())
    scripts = write_scripts(tmp_path / "scripts", SOLVE_AT, latency=0.3)
    config = write_config(tmp_path / "run.yaml", scripts, tmp_path / "out",
                          **{**STANDARD_RUN, "parallel-mode": "ray", "ray-address": cluster.address})
    token_file = tmp_path / "ray token"
    token_file.write_text(cluster.token)
    main = start_cli(config, env=driver_env(tmp_path / "home", RAY_AUTH_TOKEN_PATH=str(token_file)))
    try:
        deadline = time.monotonic() + 240
        while not any(node == "worker" and fn == run_job.__name__ for node, fn, _, _ in cluster.placements()):
            assert main.poll() is None, main.communicate()
            assert time.monotonic() < deadline, "no job reached the worker node"
            time.sleep(0.1)
        cluster.kill("worker")
        stdout, stderr = main.communicate(timeout=400)
    finally:
        if main.poll() is None:
            os.killpg(main.pid, signal.SIGKILL)
    assert main.returncode == 0, stderr
    placed = cluster.placements()
    print("\n".join(f"{node:6} {fn}({words}) on {node_id[:12]}" for node, fn, words, node_id in placed))
    assert {node for node, *_ in placed} == {"head", "worker"}
    assert len({node_id for *_, node_id in placed}) == 2
    jobs = {words for _, fn, words, _ in placed if fn == run_job.__name__}
    assert len(jobs) == len(STANDARD_RUN["task-ids"]) * len(STANDARD_RUN["guidance-level"])
    assert results(tmp_path / "out") == reference
