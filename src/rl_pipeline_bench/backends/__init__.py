"""Backend registry: every subpackage of `rl_pipeline_bench.backends` is one backend.

A backend package exports `BACKEND`, a `descriptor.Backend`. `names()` lists the
packages without importing them (standard library only, so provenance can use it
inside an image without the benchmark's dependencies); `get(name)` imports one and
checks its descriptor. Framework drivers import their frameworks lazily inside
`run`, so registering ART or SkyRL never needs them installed.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

#: Where the registered backend packages live in a source tree (relative to its root).
PACKAGE_DIR = Path("src") / "rl_pipeline_bench" / "backends"
#: Subpackages that are not backends: the framework kit the framework drivers share.
SHARED_PACKAGES = frozenset({"framework"})


def names(root: Path | str | None = None) -> list[str]:
    """Registered backend names, sorted: the backend packages of this installation, or of tree `root`."""
    path = Path(root) / PACKAGE_DIR if root is not None else Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(path)]) if m.ispkg and m.name not in SHARED_PACKAGES)


def get(name: str):
    """The descriptor of backend `name`; an unknown name fails listing the registered ones."""
    from ..records.configfile import check_member

    check_member("backend", name, names())
    module = importlib.import_module(f"{__name__}.{name}")
    backend = getattr(module, "BACKEND", None)
    from .descriptor import Backend

    if not isinstance(backend, Backend):
        raise RuntimeError(f"backend package {module.__name__} exports no BACKEND descriptor (rl_pipeline_bench.backends.descriptor.Backend)")
    if backend.name != name:
        raise RuntimeError(f"backend package {module.__name__} describes itself as {backend.name!r}, not {name!r}")
    return backend


def registered():
    """Every registered backend's descriptor, in name order."""
    return [get(n) for n in names()]
