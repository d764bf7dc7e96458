"""The published dataset's environments, and how requirement lines become installs.

The published dataset ships one ``requirements_*.txt`` per environment at its
root and names the environment in each task's test.sh (``conda activate
test_common1``). ``RELEASE_ENVS`` maps those names to their files and the
steps the authors run after the main install. ``plan_install`` turns the lines
of any requirements file into what pip can actually install: PyTorch local
version tags (``+cu128``) need the PyTorch wheel index of that tag, ``+cpu``
tags are dropped (the release does so for test_981, whose torch comes from
PyPI), and ``cpu=True`` swaps every CUDA build for its CPU wheel, for machines
without a GPU. Pure functions: building lives in ``agent.envs.cache``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

DEFAULT_TORCH_INDEX = "https://download.pytorch.org/whl"
DEFAULT_PYG_WHEELS = "https://data.pyg.org/whl"
# Packages the PyTorch index serves in CPU and CUDA builds; an exact pin without a tag gets ``+cpu`` under cpu=True.
TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio"})
# Compiled PyG extensions: PyPI has only sources that need torch at build time; PyG publishes a wheel page per torch build.
PYG_EXTENSIONS = frozenset({"torch-scatter", "torch-sparse", "torch-cluster", "torch-spline-conv", "pyg-lib"})
_PINNED = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<extras>\s*\[[^\]]*\])?\s*==\s*(?P<version>[0-9][^\s;+,]*)"
    r"(?:\+(?P<tag>[A-Za-z0-9.]+))?\s*(?P<marker>;.*)?$"
)
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")
_CUDA_TAG = re.compile(r"^cu\d+$")
_GPU_ONLY = re.compile(r"^(nvidia-.*-cu\d+|triton)$")


def canonical_name(name: str) -> str:
    """PEP 503 normal form of a distribution name (``Foo_Bar.baz`` -> ``foo-bar-baz``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def line_name(line: str) -> str | None:
    """Canonical distribution name of a requirement line; None for options (``-r``, ``--index-url``...)."""
    if line.startswith("-"):
        return None
    match = _NAME.match(line)
    return canonical_name(match.group(1)) if match else None


@dataclass(frozen=True)
class PostStep:
    """One install run after the main one (``requirements`` are pip requirement strings).

    ``torch_wheel_page``: add ``--find-links`` of the PyG wheel page of the torch
    build actually installed (known only once torch is in the environment).
    """

    requirements: tuple[str, ...]
    no_deps: bool = False
    torch_wheel_page: bool = False
    why: str = ""


@dataclass(frozen=True)
class _GitPackage:
    name: str
    url: str


@dataclass(frozen=True)
class ReleaseEnv:
    """An environment of the published dataset: its requirements file and post-install steps."""

    requirements_file: str
    pinned: tuple[str, ...] = ()  # exact requirements installed after the main install
    no_deps: tuple[str, ...] = ()  # installed after, without dependencies
    git: tuple[_GitPackage, ...] = ()  # installed after, from their repositories


_CLIP = _GitPackage("clip", "git+https://github.com/openai/CLIP.git")
_MHN_REACT = _GitPackage("mhnreact", "git+https://github.com/ml-jku/mhn-react.git")
_DASSL = _GitPackage("dassl", "git+https://github.com/KaiyangZhou/Dassl.pytorch.git")

RELEASE_ENVS: dict[str, ReleaseEnv] = {
    "test_newtransformer1": ReleaseEnv("requirements_newtransformer.txt", git=(_CLIP, _MHN_REACT)),
    "test_281": ReleaseEnv("requirements_28.txt"),
    "test_191": ReleaseEnv("requirements_19.txt"),
    # Its tasks import pkg_resources.packaging, which later setuptools removed.
    "test_common1": ReleaseEnv(
        "requirements_test_common.txt", pinned=("setuptools==73.0.1",), no_deps=("dgl==1.1.3",),
        git=(_CLIP, _MHN_REACT, _DASSL),
    ),
    "test_151": ReleaseEnv("requirements_15.txt"),
    "test_511": ReleaseEnv("requirements_51.txt"),
    "test_631": ReleaseEnv("requirements_63.txt"),
    "test_981": ReleaseEnv("requirements_98.txt", no_deps=("dgl==1.1.3",)),
}


def release_post_steps(env: ReleaseEnv, lines: list[str]) -> list[PostStep]:
    """The release's post-install steps of ``env``; a git package pinned in the file keeps its pinned commit."""
    in_file = {line_name(line): line for line in lines}
    steps = [PostStep(tuple(env.pinned), why="release post-install")] if env.pinned else []
    steps += [PostStep((requirement,), no_deps=True, why="release post-install, without dependencies") for requirement in env.no_deps]
    steps += [PostStep((in_file.get(package.name) or f"{package.name} @ {package.url}",), why="release post-install from git")
              for package in env.git]
    return steps


@dataclass(frozen=True)
class InstallPlan:
    """What to install for one requirements file.

    ``lines``: the main install's requirement lines, in file order;
    ``index_tags``: PyTorch wheel indexes it needs (``cu128``, ``cpu``);
    ``post_install``: steps after it; ``changed``: ``lines`` differ from the file's.
    """

    lines: tuple[str, ...]
    index_tags: tuple[str, ...]
    post_install: tuple[PostStep, ...]
    changed: bool


def _retag(line: str, cpu: bool, tags: list[str]) -> str | None:
    """The line as pip can install it (None: leave it out); records the PyTorch index tags it needs."""
    name = line_name(line)
    if name is None:
        return line
    if cpu and _GPU_ONLY.match(name):
        return None
    match = _PINNED.match(line)
    if not match:
        return line
    tag = match.group("tag")
    if tag == "cpu":
        new_tag = "cpu" if cpu else None
    elif tag and _CUDA_TAG.match(tag):
        new_tag = "cpu" if cpu else tag
    elif tag is None and cpu and name in TORCH_FAMILY:
        new_tag = "cpu"
    else:
        return line
    if new_tag:
        tags.append(new_tag)
    head = match.group("name") + (match.group("extras") or "").strip() + "==" + match.group("version")
    marker = f" {match.group('marker').strip()}" if match.group("marker") else ""
    return head + (f"+{new_tag}" if new_tag else "") + marker


def plan_install(lines: list[str], release_env: ReleaseEnv | None, cpu: bool) -> InstallPlan:
    """Main-install lines, PyTorch index tags and post-install steps for the logical lines of one file.

    A package that a post-install step installs is left out of the main
    install, so it is installed once, the way the step says (e.g. test_common1
    pins ``dgl==2.5a241215+cu124``, which no index serves; the release installs
    ``dgl==1.1.3`` after).
    """
    steps = release_post_steps(release_env, lines) if release_env else []
    pyg = tuple(line for line in lines if line_name(line) in PYG_EXTENSIONS)
    if pyg:
        steps.append(PostStep(pyg, torch_wheel_page=True, why="PyG wheels of the installed torch build"))
    moved = {line_name(requirement) for step in steps for requirement in step.requirements}
    tags: list[str] = []
    kept = []
    for line in lines:
        if line_name(line) in moved:
            continue
        new = _retag(line, cpu, tags)
        if new is not None:
            kept.append(new)
    return InstallPlan(tuple(kept), tuple(dict.fromkeys(tags)), tuple(steps), kept != lines)


def torch_index_url(tag: str, environ: dict[str, str] | None = None) -> str:
    """PyTorch wheel index of one build tag; RECODE_TORCH_INDEX_URL replaces the base (a mirror)."""
    environ = os.environ if environ is None else environ
    base = environ.get("RECODE_TORCH_INDEX_URL", "").strip() or DEFAULT_TORCH_INDEX
    return f"{base.rstrip('/')}/{tag}"


def torch_build_tag(version: str, cuda: str | None) -> str:
    """``cu128``/``cpu`` of an installed torch from ``torch.__version__`` and ``torch.version.cuda``."""
    _, _, tag = version.partition("+")
    if tag:
        return tag
    return "cu" + cuda.replace(".", "") if cuda else "cpu"


def pyg_wheel_base(environ: dict[str, str] | None = None) -> str:
    """Where PyG's wheel pages are; RECODE_PYG_WHEEL_URL replaces it (a mirror)."""
    environ = os.environ if environ is None else environ
    return (environ.get("RECODE_PYG_WHEEL_URL", "").strip() or DEFAULT_PYG_WHEELS).rstrip("/")


def pyg_wheel_page(version: str, cuda: str | None, environ: dict[str, str] | None = None) -> str:
    """PyG's wheel page for an installed torch: one page per minor version and build (``torch-2.8.0+cu128.html``)."""
    major, minor = (version.split("+")[0].split(".") + ["0"])[:2]
    return f"{pyg_wheel_base(environ)}/torch-{major}.{minor}.0+{torch_build_tag(version, cuda)}.html"
