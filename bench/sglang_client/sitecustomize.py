"""Import stubs that let ``python -m sglang.benchmark.serving`` (SGLang 0.5.23) run without a GPU stack.

Loaded automatically when this directory is on ``PYTHONPATH``. Stubs three things, nothing else:

- ``triton`` (``sglang/__init__`` → ``sglang.srt.utils.common`` imports it; the real wheel is ~1 GB);
- ``sglang.srt.disaggregation.utils``: ``serving.py`` takes only ``FAKE_BOOTSTRAP_HOST`` from it, but the real
  module pulls in the whole server (torchvision, quantization kernels, ...);
- ``datasets``: ``sglang.benchmark.datasets`` imports ``load_dataset`` for MMMU; the random-ids dataset used
  here never calls it (pyarrow and pandas would cost ~300 MB).

From ../shared/reference/sglang-bench-client.md §1 (the triton stub's shape is explained there).
"""

import importlib.abc
import importlib.machinery
import sys
import types


class _Any:
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return a[0] if len(a) == 1 and callable(a[0]) and not k else _Any()  # bare decorator

    def __getattr__(self, n):
        if n.startswith("__"):
            raise AttributeError(n)
        return _Any()

    def __getitem__(self, k):
        return _Any()

    def __bool__(self):
        return False


class _Meta(type):
    def __getattr__(cls, n):
        if n.startswith("__"):
            raise AttributeError(n)
        return cls._attrs.setdefault(n, _Any())


_classes = {}


def _mod_getattr(n):
    if n.startswith("__"):
        raise AttributeError(n)
    if n[:1].isupper():  # CamelCase names are used as types (isinstance / subclassing)
        return _classes.setdefault(n, _Meta(n, (), {"__init__": lambda s, *a, **k: None, "_attrs": {}}))
    return _Any()


def _load_dataset(*args, **kwargs):
    raise RuntimeError("datasets is stubbed in this environment (bench/sglang_client/sitecustomize.py)")


class _Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == "triton" or name.startswith("triton."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        if name in ("sglang.srt.disaggregation.utils", "datasets"):
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__file__ = __file__
        if spec.name.startswith("triton"):
            m.__path__ = []
            m.__getattr__ = _mod_getattr
            m.__version__ = "3.0.0"
        elif spec.name == "datasets":
            m.load_dataset = _load_dataset
        else:
            m.FAKE_BOOTSTRAP_HOST = "2.2.2.2"  # value in sglang 0.5.23
        return m

    def exec_module(self, m):
        pass


sys.meta_path.insert(0, _Stubs())
