"""How every framework driver's `run(ctx)` opens: preflight, the framework's imports, its native directory.

    def run(ctx):
        with driver_opening(ctx, "art") as opened:
            import art            # the framework, imported only here
        native_dir, n = opened.native_dir, opened.n

The suite is checked against the backend's descriptor first (a suite the backend cannot
run fails naming its config key, also where the framework is not installed); an
ImportError inside the block says the driver runs inside its backend's image; the
native directory (`<evidence>/native`, where the framework writes its own records)
exists once the block has run.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from ..context import RunContext

#: The evidence subdirectory a framework's own records (config, logs, train log) go to.
NATIVE_DIR = "native"


@dataclass(frozen=True)
class Opened:
    """A framework run past its opening."""

    ctx: RunContext
    framework: str
    native_dir: Path

    @property
    def n(self) -> int:
        """N: the updates the run trains (the contract's warmup + measured)."""
        return self.ctx.trained_updates


@contextlib.contextmanager
def driver_opening(ctx: RunContext, backend: str) -> Iterator[Opened]:
    """Preflight `ctx.run_spec` for `backend`, then run the block (the framework's imports)."""
    from .. import get
    from ..suite_checks import preflight

    preflight(ctx.run_spec, backend)
    framework = get(backend).framework or backend
    opened = Opened(ctx=ctx, framework=framework, native_dir=Path(ctx.writer.path) / NATIVE_DIR)
    try:
        yield opened
    except ImportError as exc:
        raise RuntimeError(f"the {backend} driver runs inside the {backend} image; "
                           f"{framework} is not importable here ({exc})") from exc
    opened.native_dir.mkdir(parents=True, exist_ok=True)
