"""What building an environment will install and roughly how big it gets, said before the build starts.

A build can take many minutes and gigabytes (a CUDA torch brings ~3 GB of ``nvidia-*`` wheels), so nothing
is built without a line naming it first. Sizes are estimates from typical installed sizes of the packages
that dominate research environments, not a download: the index is not asked.
"""
from __future__ import annotations

from agent.envs.release import line_name
from agent.envs.spec import EnvSpec

# Typical installed size (MB, Linux x86-64 wheels, recent versions) of the packages that make an environment
# large; every other package counts SMALL_MB. Rounded: the line says "about".
LARGE_MB = {
    "torch": 900, "tensorflow": 1900, "jaxlib": 250, "dgl": 250, "xformers": 200, "opencv-python": 150,
    "opencv-python-headless": 120, "scipy": 110, "pandas": 110, "pyarrow": 130, "transformers": 60,
    "numpy": 60, "scikit-learn": 50, "matplotlib": 40, "torchvision": 30, "torchaudio": 20, "sympy": 60,
    "networkx": 20, "llvmlite": 130, "numba": 20, "open-clip-torch": 10, "timm": 10,
}
CUDA_EXTRA_MB = 3300  # the nvidia-* and triton wheels a CUDA torch pulls in
BASE_MB = 80  # python's standard library, pip, pytest and their dependencies
SMALL_MB = 5


def package_names(spec: EnvSpec) -> list[str]:
    """The distributions the main install and the post-install steps name, in order, each once."""
    lines = [*(spec.install_lines or spec.requirements), *(req for step in spec.post_install for req in step.requirements)]
    return list(dict.fromkeys(name for line in lines if (name := line_name(line.strip())) is not None))


def torch_build(spec: EnvSpec) -> str | None:
    """``CPU`` or ``CUDA`` for an environment with torch (a plain pin from PyPI is its CUDA build on Linux)."""
    if "torch" not in package_names(spec):
        return None
    return "CPU" if spec.cpu or set(spec.index_tags) == {"cpu"} else "CUDA"


def estimate_mb(spec: EnvSpec) -> int:
    names = package_names(spec)
    total = BASE_MB + sum(LARGE_MB.get(name, SMALL_MB) for name in names)
    return total + (CUDA_EXTRA_MB if torch_build(spec) == "CUDA" else 0)


def _size(mb: int) -> str:
    return f"{mb / 1000:.1f} GB" if mb >= 1000 else f"{mb} MB"


def announcement(spec: EnvSpec, torch_fallback: str = "") -> str:
    """One line: which environment, for which tasks' group, what it installs and about how big it gets.

    ``torch_fallback``: PyTorch's CPU index that did not answer, so torch comes from the configured index.
    """
    names = package_names(spec)
    large = [name for name in names if LARGE_MB.get(name, 0) >= 100]
    build = torch_build(spec)
    torch = f", torch {build} build" if build else ""
    size = _size(estimate_mb(spec))
    if build == "CUDA" and torch_fallback:
        torch = (f", torch from the configured index ({torch_fallback} did not answer; RECODE_TORCH_INDEX_URL: "
                 "a mirror of it), the CUDA build if that index is PyPI")
        size = f"{_size(estimate_mb(spec) - CUDA_EXTRA_MB)} (CPU build) to {size} (CUDA build)"
    elif build == "CUDA":
        torch += " (RECODE_ENV_CPU=1 or --cpu: the CPU build)"
    source = spec.requirements_file or "the built-in requirements"
    return (f"environment {spec.name} for '{spec.group}': python {spec.python_version} ({spec.backend}), "
            f"{len(names)} packages from {source}{torch}; largest: {', '.join(large) or 'none over 100 MB'}; "
            f"about {size} on disk (an estimate)")
