"""Check native settings against a framework's own type declarations (TypedDicts, dataclasses, pydantic).

Frameworks accept some mistakes silently: a TypedDict is a plain dict at run time,
SkyRL's dataclass builder passes values through untyped, and a pydantic model
ignores unknown keys by default. These helpers turn each into a named problem.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any


def _is_typeddict(tp: Any) -> bool:
    import typing_extensions

    return typing_extensions.is_typeddict(tp) or typing.is_typeddict(tp)


def validate_typed_dict(td: type, value: Any, path: str = "") -> list[str]:
    """Check a dict against a (nested) TypedDict: unknown keys and wrong value types.

    Leaf values are validated by pydantic against the TypedDict's own annotation;
    returns problems (empty when the value conforms).
    """
    from pydantic import TypeAdapter, ValidationError

    if not isinstance(value, dict):
        return [f"{path or '(top)'}: expected a mapping for {td.__name__}, got {type(value).__name__}"]
    hints = typing.get_type_hints(td)
    problems = []
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        if key not in hints:
            problems.append(f"{where}: unknown key for {td.__name__} (known: {', '.join(sorted(hints))})")
            continue
        ann = hints[key]
        inner = [a for a in typing.get_args(ann) if _is_typeddict(a)] if not _is_typeddict(ann) else [ann]
        if inner and isinstance(item, dict):
            problems += validate_typed_dict(inner[0], item, where)
            continue
        try:
            TypeAdapter(ann).validate_python(item, strict=True)
        except ValidationError as exc:
            problems.append(f"{where}: {exc.errors()[0]['msg']} (annotation {ann})")
    return problems


def unknown_model_keys(model_cls: type, value: dict[str, Any], path: str = "") -> list[str]:
    """Keys of `value` that a pydantic model class does not declare (it would drop them silently)."""
    known = set(model_cls.model_fields)
    return [f"{path + '.' if path else ''}{k}: unknown key for {model_cls.__name__} (known: {', '.join(sorted(known))})"
            for k in value if k not in known]


def check_dataclass_types(obj: Any, path: str = "") -> list[str]:
    """Validate every field of a (nested) config dataclass against its annotation.

    SkyRL's builder rejects unknown keys but passes values through untyped; this
    catches a string where the class declares an int, and so on.
    """
    from pydantic import TypeAdapter, ValidationError

    problems: list[str] = []
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        where = f"{path}.{f.name}" if path else f.name
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            problems += check_dataclass_types(value, where)
            continue
        try:
            TypeAdapter(hints[f.name]).validate_python(value, strict=True)
        except ValidationError as exc:
            problems.append(f"{where}: {exc.errors()[0]['msg']} (annotation {hints[f.name]}, value {value!r})")
        except Exception:  # annotations pydantic cannot build a schema for are not checked
            continue
    return problems
