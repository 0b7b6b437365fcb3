"""A framework backend's descriptor, built from its package's conventional modules.

A framework backend is one package `backends/<name>/` laid out as the kit expects:

- `driver.py`: `run(ctx)`, which opens with `framework.driver.driver_opening` and imports
  the framework inside it (the registry, reports and the workflow import the package
  without the framework installed);
- `support.py`: its `python -m` support check, run in the framework's own environment
  (`framework.support`);
- the module that builds its native settings from a run spec (named on the descriptor,
  e.g. `config:build_art_config`);
- `__init__.py`: `BACKEND = framework_backend(...)`.

Functions of the package's own modules are named as "module:function" and imported when
first called (`PackageEntry`), so describing a backend never loads its run modules.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ..descriptor import Backend
from ..topology import Topology

#: The package every backend lives in (`rl_pipeline_bench.backends`).
BACKENDS_PACKAGE = __name__.rsplit(".", 2)[0]


@dataclass(frozen=True)
class PackageEntry:
    """A function of a backend package's own module, imported when first called."""

    package: str
    entry: str  # "module:function", the module relative to the package

    def __post_init__(self) -> None:
        module, sep, function = self.entry.partition(":")
        if not (sep and module and function):
            raise ValueError(f"{self.package}: entry {self.entry!r} is not 'module:function'")

    def resolve(self):
        module, _, function = self.entry.partition(":")
        return getattr(importlib.import_module(f"{self.package}.{module}"), function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)


def framework_backend(*, name: str, framework: str, topology: Topology, models: tuple[str, ...],
                      native_config: str, package_homes: str | None = None, packages: tuple[str, ...] = (),
                      **fields: Any) -> Backend:
    """The descriptor of a framework run under the comparison contract.

    name: its package under backends/ (its `driver:run` is its entry point).
    framework: the framework's distribution (first of the manifest's `packages`).
    native_config: "module:function" of its package: run spec -> the native settings
        `bench preflight` asks the installed framework about (Backend.native_support).
    package_homes: "module:function" of its package (Backend.package_homes), if any.

    CUDA only, exactly its topology's GPUs, a revision-pinned hub snapshot of one of its
    supported models. Its trainer batches work across plan updates (its own batching and
    autotuning), so calls reconcile over the run. Its trainer is timed at the controller,
    one interval per step recorded as rank 0 (the descriptor's default `trainer_ranks`).

    Its container runs share the host's IPC namespace (vLLM's Docker guide asks for
    `--ipc=host` or a large `--shm-size`: PyTorch shares tensors between processes
    through shared memory) and the host's network (Ray and NCCL discover node
    addresses; a loopback-only container has not been tried with them).
    """
    package = f"{BACKENDS_PACKAGE}.{name}"
    fields.setdefault("trains_plan_updates", False)
    fields.setdefault("container_network", "host")
    fields.setdefault("container_host_config", {"ipc_mode": "host"})
    return Backend(
        name=name, framework=framework, run=PackageEntry(package, "driver:run"),
        native_support=PackageEntry(package, native_config),
        package_homes=PackageEntry(package, package_homes) if package_homes else None,
        packages=(framework, *(p for p in packages if p != framework)),
        devices=("cuda",), gpus=topology.train_gpus + topology.inference_gpus, topology=topology,
        models=models, model_sources=("hub",), **fields)
