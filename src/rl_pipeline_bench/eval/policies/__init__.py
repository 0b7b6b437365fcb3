"""Policies under evaluation: a small interface, a checkpoint loader, a scripted baseline."""

from .base import Policy, PolicyRef  # noqa: F401
from .loader import PolicyLoadError, checkpoint_identity, load_policy, resolve_ref  # noqa: F401
