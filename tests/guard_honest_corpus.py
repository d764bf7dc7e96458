"""Honest but unusual research files: each sample task's canonical.py plus harmless additions of the kinds
research code carries (global numeric settings, seeds, warning filters, logging, caches, dataclasses,
custom exceptions and class hierarchies, a command-line block, torch flags, custom autograd Functions,
TorchScript...). Every one must stay ``passed`` under the guard (tests/test_guard_corpus.py).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Addition:
    name: str
    imports: str = ""  # placed after the canonical file's own imports
    code: str = ""  # appended at the end of the file
    transform: Callable[[str], str] | None = None  # rewrites the canonical source itself
    torch: bool = False  # for the torch tasks only
    task: int | None = None  # rewrites one task's implementation (its kernel through TorchScript, autograd...)


def public_functions(source: str) -> list[str]:
    return [n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]


def _after_imports(source: str, block: str) -> str:
    lines = source.splitlines(keepends=True)
    last = max(n.end_lineno for n in ast.parse(source).body if isinstance(n, (ast.Import, ast.ImportFrom)))
    return "".join(lines[:last]) + "\n" + block.rstrip("\n") + "\n" + "".join(lines[last:])


def _wrap_public(decorator: str) -> Callable[[str], str]:
    """Every public function of the file goes through ``decorator`` (defined by the addition's code)."""
    def transform(source: str) -> str:
        names = public_functions(source)
        return source + f"\n\nfor _name in {names!r}:\n    globals()[_name] = {decorator}(globals()[_name])\n"
    return transform


def _rename_errors(source: str) -> str:
    return source.replace("raise ValueError(", "raise TaskInputError(")


ADDITIONS = {a.name: a for a in [
    Addition("numpy_global_settings", "import numpy as _np_settings\n", '''
_np_settings.seterr(divide="warn", over="warn", invalid="warn", under="ignore")
_np_settings.set_printoptions(precision=6, suppress=True, linewidth=120)
'''),
    Addition("warning_filters", "import warnings\n", '''
warnings.filterwarnings("ignore", category=DeprecationWarning, module="numpy")
warnings.simplefilter("default", ResourceWarning)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    warnings.warn("this implementation is experimental", UserWarning)
'''),
    Addition("logging_configuration", "import functools\nimport logging\n", '''
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
logging.captureWarnings(True)
_log = logging.getLogger(__name__)


def _logged(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        _log.debug("calling %s with %d positional arguments", function.__name__, len(args))
        return function(*args, **kwargs)
    return wrapper
''', _wrap_public("_logged")),
    Addition("seeds", "import random\nimport numpy as _np_seeds\n", '''
random.seed(0)
_np_seeds.random.seed(0)
_GENERATOR = _np_seeds.random.default_rng(1234)
'''),
    Addition("cached_signatures", "import functools\nimport inspect\n", '''

@functools.lru_cache(maxsize=None)
def _signature(function):
    return inspect.signature(function)


def _validated(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        _signature(function).bind(*args, **kwargs)
        return function(*args, **kwargs)
    return wrapper
''', _wrap_public("_validated")),
    Addition("dataclasses_with_eq", "from dataclasses import dataclass as _dataclass, field as _field\n", '''

@_dataclass(frozen=True)
class _Defaults:
    """Run defaults; equal when the numbers agree to 12 digits (a hand-written __eq__)."""

    tolerance: float = 1e-12
    tags: tuple = _field(default_factory=tuple)

    def __eq__(self, other):
        if not isinstance(other, _Defaults):
            return NotImplemented
        return round(self.tolerance, 12) == round(other.tolerance, 12) and self.tags == other.tags

    def __hash__(self):
        return hash((round(self.tolerance, 12), self.tags))


@_dataclass
class _Record:
    name: str
    calls: int = 0


DEFAULTS = _Defaults()
assert DEFAULTS == _Defaults(1e-12 + 1e-20) and _Record("a") == _Record("a")
'''),
    Addition("custom_exceptions", "", '''
''', lambda source: _after_imports(_rename_errors(source), '''

class TaskInputError(ValueError):
    """Bad input to this module (still a ValueError for callers)."""


class ShapeError(TaskInputError):
    pass
''')),
    Addition("abstract_hierarchy", "import abc\n", '''

class _Step(abc.ABC):
    __slots__ = ("scale",)

    def __init__(self, scale=1.0):
        self.scale = scale

    @abc.abstractmethod
    def apply(self, value):
        ...

    @property
    def doubled(self):
        return 2 * self.scale

    @classmethod
    def unit(cls):
        return cls(1.0)


class _Identity(_Step):
    __slots__ = ()

    def apply(self, value):
        return value


class _Scaled(_Identity):
    __slots__ = ()

    def apply(self, value):
        return self.scale * super().apply(value)


assert _Scaled.unit().apply(3.0) == 3.0 and _Identity(2.0).doubled == 4.0
'''),
    Addition("enums_and_named_tuples", "import enum\nfrom typing import NamedTuple, Protocol, TypeVar\n", '''

class Mode(str, enum.Enum):
    FAST = "fast"
    EXACT = "exact"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class _Span(NamedTuple):
    start: int
    stop: int


class _Sized(Protocol):
    def __len__(self) -> int: ...


_T = TypeVar("_T")
assert Level.HIGH > Level.LOW and Mode("fast") is Mode.FAST and _Span(1, 2).stop == 2
'''),
    Addition("command_line_block", "import argparse\nimport sys\n", '''

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.seed < 0:
        print("seed must be non-negative", file=sys.stderr)
        sys.exit(2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''),
    Addition("quiet_printing", "import contextlib\nimport io\nimport sys\n", '''

def _report():
    print("module loaded:", __name__)
    print("warnings go to stderr", file=sys.stderr)


with contextlib.redirect_stdout(io.StringIO()):
    _report()
'''),
    Addition("thread_safe_counter", "import functools\nimport threading\n", '''
_LOCK = threading.Lock()
_CALLS = {}


def _counted(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with _LOCK:
            _CALLS[function.__name__] = _CALLS.get(function.__name__, 0) + 1
        return function(*args, **kwargs)
    return wrapper
''', _wrap_public("_counted")),
    Addition("dispatch_and_cached_property", "import functools\n", '''

@functools.singledispatch
def _describe(value):
    return type(value).__name__


@_describe.register
def _(value: int):
    return "integer"


class _Lazy:
    @functools.cached_property
    def table(self):
        return [i * i for i in range(10)]


assert _describe(3) == "integer" and _Lazy().table[3] == 9
'''),
    Addition("temp_files_and_pickling", "import copy\nimport json\nimport os\nimport pickle\nimport tempfile\n", '''
_SETTINGS = {"version": 1, "notes": ["unusual but harmless"]}
with open(os.path.join(tempfile.gettempdir(), "recode_honest_settings.json"), "w") as _handle:
    json.dump(_SETTINGS, _handle)
assert pickle.loads(pickle.dumps(_SETTINGS)) == copy.deepcopy(_SETTINGS)
'''),
    Addition("dynamic_stdlib_import", "import importlib\nimport os\nimport sys\n", '''
_math = importlib.import_module("math")
os.environ.setdefault("OMP_NUM_THREADS", "1")
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
assert _math.isclose(_math.pi, 3.141592653589793)
'''),
    Addition("introspection_and_tracebacks", "import functools\nimport inspect\nimport traceback\n", '''
try:
    import einops  # noqa: F401  (optional; not needed)
except ImportError:
    _MISSING = traceback.format_exc(limit=1)


def _traced(function):
    parameters = list(inspect.signature(function).parameters)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if len(args) > len(parameters) and not any(p.kind == p.VAR_POSITIONAL
                                                   for p in inspect.signature(function).parameters.values()):
            traceback.format_stack(limit=3)
        return function(*args, **kwargs)
    return wrapper
''', _wrap_public("_traced")),
    Addition("process_housekeeping", "import atexit\nimport gc\nimport sys\n", '''
sys.setrecursionlimit(max(sys.getrecursionlimit(), 2000))
gc.collect()
atexit.register(lambda: None)
'''),
    Addition("warnings_inside_functions", "import functools\nimport warnings\n", '''

def _noisy(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warnings.warn(f"{function.__name__} is an unoptimised reference port", RuntimeWarning, stacklevel=2)
        return function(*args, **kwargs)
    return wrapper
''', _wrap_public("_noisy")),
    Addition("torch_backends_flags", "import torch as _torch_flags\n", '''
_torch_flags.backends.cudnn.deterministic = True
_torch_flags.backends.cudnn.benchmark = False
_torch_flags.backends.cudnn.allow_tf32 = False
_torch_flags.backends.cuda.matmul.allow_tf32 = False
_torch_flags.set_float32_matmul_precision("highest")
''', torch=True),
    Addition("torch_printing_threads_dtype", "import torch as _torch_state\n", '''
_torch_state.set_printoptions(precision=4, sci_mode=False)
_torch_state.set_num_threads(1)
_torch_state.set_default_dtype(_torch_state.float32)
_torch_state.manual_seed(0)
''', torch=True),
    Addition("torch_module_hierarchy", "import torch as _torch_nn\n", '''

def _count_call(module, inputs, output):
    module.calls.add_(1)


class _Counter(_torch_nn.nn.Module):
    """A module of its own, subclassed again, with a forward hook that counts calls."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", _torch_nn.zeros((), dtype=_torch_nn.long))
        self.register_forward_hook(_count_call)

    def forward(self, x):
        return x


class _Doubling(_Counter):
    def forward(self, x):
        return 2 * super().forward(x)


assert _Doubling()(_torch_nn.ones(2)).sum().item() == 4.0
''', torch=True),
    Addition("torch_autograd_function", "import torch as _torch_autograd\n", '''

class _Square(_torch_autograd.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


_x = _torch_autograd.tensor([3.0], requires_grad=True)
_Square.apply(_x).sum().backward()
assert _x.grad.item() == 6.0
''', torch=True),
    Addition("torch_jit_script", "import torch as _torch_jit\n", '''

@_torch_jit.jit.script
def _axpy(a: float, x: _torch_jit.Tensor, y: _torch_jit.Tensor) -> _torch_jit.Tensor:
    return a * x + y


assert _axpy(2.0, _torch_jit.ones(2), _torch_jit.ones(2)).tolist() == [3.0, 3.0]
''', torch=True),
    Addition("torch_no_grad_helpers", "import functools\nimport torch as _torch_grad\n", '''

@_torch_grad.no_grad()
def _norms(*tensors):
    return [t.norm().item() for t in tensors]


with _torch_grad.inference_mode():
    _norms(_torch_grad.ones(3))
''', torch=True),
    # task-specific: the implementation itself goes through TorchScript or a custom autograd Function
    Addition("rotary_jit_kernel", "", "", lambda source: _after_imports(source.replace(
        "rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)",
        "rotated = _rotate_pairs(even, odd, cos, sin)"), '''

@torch.jit.script
def _rotate_pairs(even: torch.Tensor, odd: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
'''), torch=True, task=4),
    Addition("rotary_autograd", "", "", lambda source: _after_imports(source.replace(
        "rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)",
        "rotated = _RotatePairs.apply(even, odd, cos, sin)"), '''

def _reduce_to(grad, shape):
    while grad.dim() > len(shape):
        grad = grad.sum(0)
    for axis, size in enumerate(shape):
        if size == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis, keepdim=True)
    return grad


class _RotatePairs(torch.autograd.Function):
    """The pairwise rotation with its gradient written out (cos and sin broadcast against the pairs)."""

    @staticmethod
    def forward(ctx, even, odd, cos, sin):
        ctx.save_for_backward(even, odd, cos, sin)
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)

    @staticmethod
    def backward(ctx, grad):
        even, odd, cos, sin = ctx.saved_tensors
        g_a, g_b = grad[..., 0], grad[..., 1]
        return (g_a * cos + g_b * sin, g_b * cos - g_a * sin,
                _reduce_to(g_a * even + g_b * odd, cos.shape), _reduce_to(g_b * even - g_a * odd, sin.shape))
'''), torch=True, task=4),
    Addition("lora_autograd_scale", "", "", lambda source: _after_imports(source.replace(
        "return base + update * self.scaling", "return base + _Scale.apply(update, self.scaling)"), '''

class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None
'''), torch=True, task=8),
    Addition("lora_jit_delta", "", "", lambda source: _after_imports(source.replace(
        "return (self.lora_B @ self.lora_A) * self.scaling", "return _scaled_product(self.lora_B, self.lora_A, self.scaling)"),
        '''

@torch.jit.script
def _scaled_product(left: torch.Tensor, right: torch.Tensor, factor: float) -> torch.Tensor:
    return (left @ right) * factor
'''), torch=True, task=8),
]}

# Five honest files per sample task: each a combination of additions (every addition appears at least twice).
COMBINATIONS = {
    1: [("numpy_global_settings", "logging_configuration"), ("seeds", "cached_signatures", "custom_exceptions"),
        ("dataclasses_with_eq", "warning_filters", "command_line_block"), ("abstract_hierarchy", "quiet_printing"),
        ("thread_safe_counter", "temp_files_and_pickling", "process_housekeeping")],
    2: [("enums_and_named_tuples", "warnings_inside_functions"), ("dispatch_and_cached_property", "seeds"),
        ("introspection_and_tracebacks", "dynamic_stdlib_import"), ("custom_exceptions", "numpy_global_settings"),
        ("logging_configuration", "dataclasses_with_eq", "process_housekeeping")],
    3: [("cached_signatures", "warning_filters"), ("command_line_block", "thread_safe_counter"),
        ("temp_files_and_pickling", "enums_and_named_tuples"), ("quiet_printing", "introspection_and_tracebacks"),
        ("abstract_hierarchy", "dispatch_and_cached_property", "custom_exceptions")],
    4: [("torch_backends_flags", "rotary_jit_kernel", "logging_configuration"),
        ("torch_printing_threads_dtype", "rotary_autograd", "custom_exceptions"),
        ("torch_module_hierarchy", "torch_autograd_function"), ("torch_jit_script", "warnings_inside_functions"),
        ("torch_no_grad_helpers", "cached_signatures", "seeds")],
    5: [("warnings_inside_functions", "dynamic_stdlib_import"), ("process_housekeeping", "enums_and_named_tuples"),
        ("numpy_global_settings", "thread_safe_counter"), ("dataclasses_with_eq", "introspection_and_tracebacks"),
        ("quiet_printing", "temp_files_and_pickling", "command_line_block")],
    6: [("logging_configuration", "abstract_hierarchy"), ("dispatch_and_cached_property", "warning_filters"),
        ("seeds", "quiet_printing"), ("cached_signatures", "dataclasses_with_eq"),
        ("custom_exceptions", "thread_safe_counter", "numpy_global_settings")],
    7: [("introspection_and_tracebacks", "enums_and_named_tuples"), ("temp_files_and_pickling", "warning_filters"),
        ("command_line_block", "dynamic_stdlib_import"), ("process_housekeeping", "abstract_hierarchy"),
        ("warnings_inside_functions", "dispatch_and_cached_property")],
    8: [("torch_backends_flags", "lora_jit_delta", "torch_jit_script"),
        ("torch_printing_threads_dtype", "torch_module_hierarchy", "lora_autograd_scale"),
        ("torch_autograd_function", "torch_no_grad_helpers"), ("torch_backends_flags", "custom_exceptions"),
        ("torch_printing_threads_dtype", "logging_configuration", "dataclasses_with_eq")],
}


def honest_source(canonical: str, names: tuple[str, ...]) -> str:
    """``canonical`` with the additions ``names``: their imports after its own, their code at its end."""
    source = canonical
    for name in names:
        addition = ADDITIONS[name]
        if addition.imports:
            source = _after_imports(source, addition.imports)
        source = source.rstrip("\n") + "\n" + addition.code if addition.code.strip() else source
        if addition.transform is not None:
            source = addition.transform(source)
    return source


def corpus(canonical_of: Callable[[int], str]) -> dict[str, tuple[int, str]]:
    """name -> (task, source) for every honest file."""
    files = {}
    for task, combinations in COMBINATIONS.items():
        for names in combinations:
            files[f"task{task}-" + "+".join(names)] = (task, honest_source(canonical_of(task), names))
    return files
