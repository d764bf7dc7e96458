"""A paper's environment needs: requirement lines from its own file or from its imports, and how papers share.

Sources, in order: the paper's own ``requirements*.txt`` at its root (taken as
written, minus torch/torchvision pins, which the shared constraints set
decides), else its third-party imports (see :mod:`agent.rcb.imports`) mapped
to distribution names. Import names that differ from their distribution are
listed in ``IMPORT_TO_DISTRIBUTION``; any other name is its own distribution.
Optional engines that code reaches through a library call rather than an
import (``pd.read_parquet`` needs pyarrow) are added by ``CALL_EXTRAS``.
Papers share an environment when no distribution is pinned differently by
two of them. Pure functions over file text.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agent.rcb.imports import PaperImports, scan_paper

RUNNER_REQUIREMENTS = ("pytest", "pytest-timeout")
TORCH_PAIR = ("torch", "torchvision")
CONSTRAINTS_FILE = "rcb_constraints.txt"
ENV_PREFIX = "rcb_"

IMPORT_TO_DISTRIBUTION = {
    "sklearn": "scikit-learn", "PIL": "pillow", "yaml": "pyyaml", "cv2": "opencv-python",
    "skimage": "scikit-image", "bs4": "beautifulsoup4", "attr": "attrs", "dateutil": "python-dateutil",
    "hydra": "hydra-core", "meltingpot": "dm-meltingpot", "tree": "dm-tree", "haiku": "dm-haiku",
    "sonnet": "dm-sonnet", "absl": "absl-py", "ml_collections": "ml-collections", "Crypto": "pycryptodome",
    "OpenSSL": "pyopenssl", "serial": "pyserial", "zmq": "pyzmq", "mpl_toolkits": "matplotlib",
    "pkg_resources": "setuptools", "faiss": "faiss-cpu", "fitz": "pymupdf", "docx": "python-docx",
    "magic": "python-magic", "ot": "pot", "IPython": "ipython", "Levenshtein": "levenshtein",
    "jose": "python-jose", "dotenv": "python-dotenv", "google.protobuf": "protobuf", "tensorboardX": "tensorboardx",
    "lightning": "lightning", "pytorch_lightning": "pytorch-lightning", "huggingface_hub": "huggingface-hub",
    "torch_fidelity": "torch-fidelity", "gym": "gym", "gymnasium": "gymnasium", "clip": "openai-clip",
    "wx": "wxpython", "git": "gitpython", "Bio": "biopython", "rdkit": "rdkit", "jwt": "pyjwt",
    "lmdb": "lmdb", "llama_cpp": "llama-cpp-python", "sentencepiece": "sentencepiece",
}
# (call pattern in the source, distribution it needs although nothing imports it)
CALL_EXTRAS = (
    (re.compile(r"\.(read|to)_(parquet|feather)\("), "pyarrow"),
    (re.compile(r"\.read_excel\("), "openpyxl"),
    (re.compile(r"\.(read|to)_hdf\("), "tables"),
    (re.compile(r"\.to_markdown\("), "tabulate"),
)
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_URL = re.compile(r"(^|\s|@)\s*(git\+|hg\+|svn\+|bzr\+|https?://|file:)")


def canonical(name: str) -> str:
    """PEP 503 normal form (``Foo_Bar`` -> ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_of(module: str) -> str:
    """The distribution that installs top-level module ``module``."""
    return IMPORT_TO_DISTRIBUTION.get(module, canonical(module))


def requirement_name(line: str) -> str | None:
    """Canonical distribution name of a requirement line (None for options, URLs without a name, blanks)."""
    egg = re.search(r"#egg=([A-Za-z0-9._-]+)", line)
    if egg:
        return canonical(egg[1])
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("-") or re.match(r"^[a-z+]+://", line):
        return None
    match = _NAME.match(line)
    return canonical(match[1]) if match else None


def is_offline_uninstallable(line: str) -> bool:
    """VCS, URL and editable requirements need a download or a source build from elsewhere than an index."""
    return bool(_URL.search(line)) or line.strip().startswith("-e")


def _specifier(line: str) -> str:
    name = _NAME.match(line)
    rest = line[name.end():] if name else line
    return "".join(rest.split(";", 1)[0].split())


@dataclass(frozen=True)
class PaperNeeds:
    """What one paper's environment must hold.

    ``requirements``: requirement lines (deduplicated, sorted); ``modules``:
    top-level import -> distribution for every third-party import found (the
    stub decision needs it even when a requirements file is the source);
    ``unavailable``: distribution -> why it cannot be installed offline.
    """

    paper: str
    source: str
    requirements: tuple[str, ...]
    modules: dict[str, str]
    unavailable: dict[str, str]
    notes: tuple[str, ...]


def _own_requirement_files(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("requirements*.txt") if p.is_file())


def _lines_of(path: Path) -> list[str]:
    lines = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def call_extras(root: Path, files: list[str]) -> list[str]:
    """Distributions needed by library calls in ``files`` (e.g. pyarrow for ``read_parquet``)."""
    found = []
    for rel in files:
        text = (root / rel).read_text(encoding="utf-8", errors="replace")
        found += [dist for pattern, dist in CALL_EXTRAS if pattern.search(text) and dist not in found]
    return found


def derive_needs(paper: str, root: Path, start_files: list[str]) -> PaperNeeds:
    """Requirements of one paper (see the module docstring)."""
    scanned: PaperImports = scan_paper(root, start_files)
    modules = {top: distribution_of(top) for top in sorted(scanned.needed)}
    own = _own_requirement_files(root)
    unavailable: dict[str, str] = {}
    notes: list[str] = []
    if own:
        source = ", ".join(p.name for p in own)
        lines = []
        for path in own:
            for line in _lines_of(path):
                name = requirement_name(line)
                if line.startswith(("-r", "-c", "--")) and not line.startswith("-e"):
                    notes.append(f"{path.name}: option '{line}' ignored")
                elif is_offline_uninstallable(line):
                    unavailable[name or line] = f"'{line}' in {path.name} needs a download outside the package index"
                elif name in TORCH_PAIR and _specifier(line):
                    notes.append(f"{path.name}: '{line}' replaced by the shared torch/torchvision pair")
                    lines.append(name)
                elif name:
                    lines.append(line)
    else:
        source = "imports"
        lines = sorted(set(modules.values()))
    extras = [dist for dist in call_extras(root, scanned.local_files) if dist not in {requirement_name(l) for l in lines}]
    requirements = tuple(sorted(set(lines + extras + list(RUNNER_REQUIREMENTS)), key=str.lower))
    return PaperNeeds(paper=paper, source=source, requirements=requirements, modules=modules,
                      unavailable=unavailable, notes=tuple(notes))


def without(needs: PaperNeeds, unavailable: dict[str, str]) -> PaperNeeds:
    """``needs`` minus the distributions found uninstallable (recorded with their reasons)."""
    drop = set(unavailable)
    kept = tuple(line for line in needs.requirements if requirement_name(line) not in drop)
    return PaperNeeds(paper=needs.paper, source=needs.source, requirements=kept, modules=needs.modules,
                      unavailable={**needs.unavailable, **unavailable}, notes=needs.notes)


def stubs_for(needs: PaperNeeds) -> dict[str, str]:
    """Top-level module -> reason, for every imported module whose distribution cannot be installed."""
    return {module: f"{dist}: {needs.unavailable[dist]}" for module, dist in needs.modules.items()
            if dist in needs.unavailable}


def pins(requirements: tuple[str, ...]) -> dict[str, str]:
    """Distribution -> version specifier, for lines that constrain the version."""
    return {name: spec for line in requirements if (name := requirement_name(line)) and (spec := _specifier(line))}


def compatible(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """No distribution constrained differently by the two sets."""
    pa, pb = pins(a), pins(b)
    return all(pa[name] == pb[name] for name in pa.keys() & pb.keys())


@dataclass(frozen=True)
class EnvGroup:
    """Papers sharing one environment, and its requirement lines."""

    name: str
    papers: tuple[str, ...]
    requirements: tuple[str, ...]


def env_name(requirements: tuple[str, ...]) -> str:
    return ENV_PREFIX + hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:10]


def group_papers(needs: list[PaperNeeds],
                 joinable: Callable[[tuple[str, ...], tuple[str, ...]], bool] | None = None) -> list[EnvGroup]:
    """Greedy sharing: each paper joins the first group compatible with it, else opens a new one.

    ``joinable(group lines, paper lines)`` may veto a statically compatible
    join (the resolver's check that sharing changes no version the paper gets).
    """
    groups: list[tuple[list[str], set[str]]] = []
    for item in needs:
        for papers, lines in groups:
            current = tuple(sorted(lines))
            if compatible(current, item.requirements) and (joinable is None or joinable(current, item.requirements)):
                papers.append(item.paper)
                lines.update(item.requirements)
                break
        else:
            groups.append(([item.paper], set(item.requirements)))
    result = []
    for papers, lines in groups:
        ordered = tuple(sorted(lines, key=str.lower))
        result.append(EnvGroup(name=env_name(ordered), papers=tuple(papers), requirements=ordered))
    return result


def requirements_text(group: EnvGroup, constraints: bool) -> str:
    """The ``requirements/<env>.txt`` of a group (with the shared constraints set when there is one)."""
    head = [f"# ResearchCodeBench papers: {', '.join(group.papers)} (derived by the importer)"]
    head += [f"-c {CONSTRAINTS_FILE}"] if constraints else []
    return "\n".join(head + list(group.requirements)) + "\n"


def constraints_text(pair: dict[str, str]) -> str:
    """The shared constraints set: one matching torch/torchvision pair for every environment."""
    lines = ["# one torch/torchvision pair for every ResearchCodeBench environment (they must match)"]
    return "\n".join(lines + [f"{name}=={version}" for name, version in sorted(pair.items())]) + "\n"
