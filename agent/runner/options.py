"""How a test run is contained: plain data shared by the run configuration and the test runner.

Kept apart from the runner so that reading a configuration imports no runner
machinery (sandbox probing, process control).
"""
from __future__ import annotations

from dataclasses import dataclass

SANDBOX_MODES = ("auto", "off", "required")


@dataclass(frozen=True)
class RunnerOptions:
    """Limits and isolation of one test run (agent/clean_test_runner.py documents what each guarantees)."""

    timeout_sec: float = 600
    sandbox: str = "auto"
    memory_mb: int | None = 8192
    max_processes: int | None = 512
    output_limit_bytes: int = 65536
    env_backend: str | None = None
    python_version: str | None = None  # of environments built on demand (default: the backend's)
    visible: tuple[str, ...] = ()  # host folders the tests may read inside the sandbox (e.g. model weights)
    cuda_devices: str | None = None  # the run's CUDA_VISIBLE_DEVICES ("" = no GPU, device nodes hidden); None = inherit

    def __post_init__(self) -> None:
        if self.sandbox not in SANDBOX_MODES:
            raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_MODES)}, got '{self.sandbox}'")
        if self.timeout_sec <= 0:
            raise ValueError(f"timeout_sec must be positive, got {self.timeout_sec}")
