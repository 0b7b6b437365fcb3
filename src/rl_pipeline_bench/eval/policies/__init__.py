"""Policies under evaluation: a small interface, a checkpoint loader, built-in scripted and stand-in policies."""

from .base import Policy, PolicyRef  # noqa: F401
from .loader import PolicyLoadError, check_benchmark, checkpoint_identity, load_policy, resolve_ref  # noqa: F401
