"""The qualification request: every flag checked before anything talks to a cluster.

Bad input is refused here, before a pod exists, naming the flag and the fix: an
image without a digest, an output directory that already exists, a source record
without this backend's hashes, a pod name Kubernetes would reject.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path, PurePosixPath
from typing import Any

from .. import backends
from ..settings.config import load_config
from ..records.configfile import ConfigError, get_suite
from ..records.jsonfile import read_json

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# Kubernetes' own name rules (apimachinery validation): an RFC 1123 label (namespaces, our pod
# names), an RFC 1123 subdomain (PVCs, Secrets, RuntimeClasses, scheduler names), a label key
# ([subdomain/]name) and a label value. fullmatch throughout: `$` would also accept a trailing newline.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_NAME = _DNS1123_LABEL
# The longest derived name is NAME-provenance (ConfigMap), NAME-collect (pod).
NAME_MAX = 63 - len("-collect")


def is_dns1123_label(value: str) -> bool:
    return len(value) <= 63 and bool(_DNS1123_LABEL.fullmatch(value))


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= 253 and bool(_DNS1123_SUBDOMAIN.fullmatch(value))


def is_label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    return (not slash or is_dns1123_subdomain(prefix)) and len(name) <= 63 and bool(_LABEL_NAME.fullmatch(name))


def is_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and bool(_LABEL_NAME.fullmatch(value)))


#: Flags naming Kubernetes objects, and the rule each name must follow.
_NAME_RULES = {
    "namespace": (is_dns1123_label, "an RFC 1123 label (lowercase letters, digits, '-'; at most 63 characters)"),
    "pvc": (is_dns1123_subdomain, "an RFC 1123 subdomain (lowercase letters, digits, '-', '.'; at most 253)"),
    "pull_secret": (is_dns1123_subdomain, "an RFC 1123 subdomain (lowercase letters, digits, '-', '.'; at most 253)"),
    "runtime_class": (is_dns1123_subdomain, "an RFC 1123 subdomain (lowercase letters, digits, '-', '.'; at most 253)"),
    "scheduler": (is_dns1123_subdomain, "an RFC 1123 subdomain (lowercase letters, digits, '-', '.'; at most 253)"),
}


def check_object_names(args) -> None:
    """Every flag that names a Kubernetes object must be a name Kubernetes accepts (no newline, no '../')."""
    for key, (valid, rule) in _NAME_RULES.items():
        value = getattr(args, key, None)
        if value is not None and not valid(value):
            raise RequestError(f"--{key.replace('_', '-')} {value!r}: not a Kubernetes name; it must be {rule}")


class RequestError(ValueError):
    """A flag cannot be honoured; the message names it and says what to give instead."""


@dataclass(frozen=True)
class ImageRef:
    """REGISTRY/IMAGE@sha256:DIGEST: the repository and the immutable manifest digest."""

    repository: str
    digest: str

    @property
    def reference(self) -> str:
        return f"{self.repository}@{self.digest}"


def parse_image(value: str) -> ImageRef:
    """Accept only an image pinned by its manifest digest (a tag can move between checks)."""
    repository, at, digest = value.strip().rpartition("@")
    if not at:
        raise RequestError(
            f"--image {value!r} has no digest: give REGISTRY/IMAGE@sha256:DIGEST (the immutable linux/amd64 "
            "manifest digest your registry reports after the push); tags are refused because they can move"
        )
    if not _DIGEST.match(digest):
        raise RequestError(f"--image {value!r}: {digest!r} is not a sha256 digest (sha256: followed by 64 lowercase hex digits)")
    if "/" not in repository or repository != repository.lower() or any(c.isspace() for c in repository):
        raise RequestError(f"--image {value!r}: the repository must be a lowercase REGISTRY/IMAGE name")
    return ImageRef(repository=repository, digest=digest)


def load_source_record(path: Path, backend: str) -> dict[str, Any]:
    """The seed's source.json: {source_sha256, recipe_sha256: {backend: sha256}}, checked for this backend."""
    make = ("uv run python -c 'import json; from rl_pipeline_bench.cli import ROOT, recipe_manifest, source_manifest; "
            "print(json.dumps(dict(source_sha256=source_manifest(), recipe_sha256=recipe_manifest(ROOT))))' > source.json")
    if not Path(path).is_file():
        raise RequestError(f"--source-provenance {path}: file not found; make it from the checkout the image was built from: {make}")
    data = read_json(path, "--source-provenance", RequestError)
    if not isinstance(data, dict):
        raise RequestError(f"--source-provenance {path}: expected a JSON object, got {type(data).__name__}")
    source = data.get("source_sha256")
    recipes = data.get("recipe_sha256")
    if not isinstance(source, str) or not _HEX64.match(source):
        raise RequestError(f"--source-provenance {path}: 'source_sha256' must be a 64-hex sha256, got {source!r}")
    if not isinstance(recipes, dict) or not isinstance(recipes.get(backend), str) or not _HEX64.match(recipes[backend]):
        raise RequestError(
            f"--source-provenance {path}: 'recipe_sha256' has no sha256 for backend {backend!r} "
            f"(has: {', '.join(sorted(recipes)) if isinstance(recipes, dict) else recipes!r}); regenerate it: {make}"
        )
    return {"source_sha256": source, "recipe_sha256": dict(recipes)}


def _check_name(name: str) -> str:
    if len(name) > NAME_MAX or not _NAME.fullmatch(name):
        raise RequestError(
            f"--name {name!r}: must be a lowercase RFC 1123 label of at most {NAME_MAX} characters "
            "(letters, digits, '-'; starting and ending with a letter or digit), unique per invocation"
        )
    return name


def _check_subpath(value: str) -> str:
    p = PurePosixPath(value)
    if not value or p.is_absolute() or ".." in p.parts or str(p) == ".":
        raise RequestError(f"--cache-subpath {value!r}: give a directory relative to the PVC root, without '..' (e.g. caches/huggingface)")
    return str(p)


def parse_node_selector(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq or not is_label_key(key) or not is_label_value(value):
            raise RequestError(f"--node-selector {item!r}: expected KEY=VALUE with a valid label key and value "
                               "(e.g. nvidia.com/gpu.product=NVIDIA-H200)")
        if key in out:
            raise RequestError(f"--node-selector: key {key!r} is given twice ({out[key]!r} and {value!r}); a node "
                               "selector holds one value per key")
        out[key] = value
    return out


@dataclass(frozen=True)
class QualifyRequest:
    backend: str
    suite: str
    workloads: tuple[str, ...]
    gpus: int
    name: str
    image: ImageRef
    source_record: dict[str, Any]
    source_record_path: str
    output: str
    context: str | None
    namespace: str
    pvc: str
    cache_subpath: str
    pull_secret: str | None = None
    scheduler: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    runtime_class: str | None = None
    host_hooks: tuple[str, ...] = ()
    invocation: str = field(default_factory=lambda: uuid.uuid4().hex)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["image"] = {"repository": self.image.repository, "digest": self.image.digest, "reference": self.image.reference}
        d["workloads"] = list(self.workloads)
        d["host_hooks"] = list(self.host_hooks)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> QualifyRequest:
        # Keys of an older record layout (a flag since replaced by host_hooks) are left out:
        # a saved request is only read to observe its pod again, never to create one.
        d = {k: v for k, v in d.items() if k in {f.name for f in fields(cls)}}
        d["image"] = ImageRef(d["image"]["repository"], d["image"]["digest"])
        d["workloads"] = tuple(d["workloads"])
        d["host_hooks"] = tuple(d.get("host_hooks") or ())
        return cls(**d)


def build_request(args, config_path: Path | None = None) -> QualifyRequest:
    """Check every flag of a fresh invocation (the output directory must not exist)."""
    try:
        config = load_config(config_path) if config_path else load_config()
        suite = get_suite(config, args.suite)
    except ConfigError as exc:
        raise RequestError(str(exc)) from None
    if args.backend not in suite["backends"]:
        raise RequestError(f"--backend {args.backend!r} is not in suite {suite.name!r} (its backends: {', '.join(suite['backends'])})")
    hooks = backends.get(args.backend).host_hooks
    for hook in args.host_hook:
        if hook not in hooks:
            raise RequestError(f"--host-hook {hook}: backend {args.backend} declares "
                               + (f"only {', '.join(sorted(hooks))}" if hooks else "no host hooks"))
    output = Path(args.output)
    if output.exists():
        raise RequestError(
            f"--output {output} already exists: every invocation needs a fresh output directory (and a unique --name); "
            f"to keep observing the pod of that invocation use --resume --output {output}"
        )
    check_object_names(args)
    if not args.pvc:
        raise RequestError("--pvc is required: the writable PersistentVolumeClaim (in --namespace) for results and the HF cache")
    if not args.cache_subpath:
        raise RequestError("--cache-subpath is required: the HF_HOME directory (with hub/ inside) relative to the PVC root")
    return QualifyRequest(
        backend=args.backend,
        suite=suite.name,
        workloads=tuple(suite["workloads"]),
        gpus=int(suite["gpus"]),
        name=_check_name(args.name),
        image=parse_image(args.image),
        source_record=load_source_record(Path(args.source_provenance), args.backend),
        source_record_path=str(Path(args.source_provenance).resolve()),
        output=str(output.resolve()),
        context=args.context,
        namespace=args.namespace,
        pvc=args.pvc,
        cache_subpath=_check_subpath(args.cache_subpath),
        pull_secret=args.pull_secret,
        scheduler=args.scheduler,
        node_selector=parse_node_selector(args.node_selector),
        runtime_class=args.runtime_class,
        host_hooks=tuple(dict.fromkeys(args.host_hook)),
    )
