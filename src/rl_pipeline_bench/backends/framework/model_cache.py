"""A run-local Hugging Face hub cache that holds only the pinned snapshot, as `main`.

A framework that looks its model up by the canonical ID with no revision (ART's packing
process: `get_tokenizer(model.base_model)`) finds nothing in a cache where the snapshot
was downloaded by commit: huggingface_hub writes no `refs/main` for a download by commit
hash, and offline it resolves a bare ID only through `refs/main`. A working directory
that holds an `ORG/NAME` link to the snapshot helps only processes started there.

`pinned_hub_cache` builds `<root>/hub/models--ORG--NAME/` with `refs/main` naming the
pinned commit and `snapshots/<commit>` linking to the snapshot (the shared cache is
neither written nor needed writable: it may be a read-only mount); with
`HF_HUB_CACHE=<root>/hub` and `HF_HUB_OFFLINE=1` in the environment, every process the
run starts resolves the bare ID to the pin, from any working directory.
"""

from __future__ import annotations

from pathlib import Path

from ...models.snapshots import repo_folder, snapshot_dir


def pinned_hub_cache(root: Path | str, repo_id: str, revision: str, snapshot: Path | str) -> Path:
    """The hub directory (for HF_HUB_CACHE) of a cache under `root` whose `main` is `revision` of `repo_id`."""
    snapshot = Path(snapshot).resolve()
    if not snapshot.is_dir():
        raise FileNotFoundError(f"model snapshot {snapshot} is not a directory")
    if len(revision) != 40 or any(c not in "0123456789abcdef" for c in revision):
        raise ValueError(f"revision {revision!r} is not a full commit hash: a bare ID must resolve to a pin")
    link = snapshot_dir(root, repo_id, revision)
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        if link.resolve() != snapshot:
            raise FileExistsError(f"{link} already points at {link.resolve()}, not {snapshot}")
    else:
        link.symlink_to(snapshot, target_is_directory=True)
    ref = repo_folder(root, repo_id) / "refs" / "main"
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(revision)
    return Path(root) / "hub"
