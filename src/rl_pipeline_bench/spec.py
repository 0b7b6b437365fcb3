"""The resolved run spec: one suite's settings after every override, keyed by their hash.

Snakemake resolves the config (config.yaml + --configfile + --config) once, and the
`run_spec` rule writes each suite's settings to `results/specs/{suite}-{hash}.json`.
Plans, runs, summaries and the report read that file, never config.yaml, so what a
job does is exactly what the user asked for. The hash covers every setting that
changes the work (see docs/run-spec.md), so an edited setting makes new targets and
identical settings find the finished ones.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import validate_config
from .configfile import ConfigError, Suite, get_suite

SPEC_SCHEMA = "rl-bench/run-spec/v1"
#: Hex digits of sha256 kept in the spec id; 48 bits make a collision between the
#: handful of specs one results/ tree holds practically impossible.
HASH_LENGTH = 12
SPEC_ID = re.compile(rf"^(?P<suite>.+)-(?P<hash>[0-9a-f]{{{HASH_LENGTH}}})$")
#: Snakemake wildcard constraint of a spec id.
SPEC_ID_PATTERN = rf"[^/]+-[0-9a-f]{{{HASH_LENGTH}}}"

#: Suite keys that describe or place a run without changing its work: not hashed.
_UNHASHED_SUITE_KEYS = ("description", "gpu_sets")


class SpecError(ConfigError):
    """A spec file that is unreadable, malformed, or does not match its hash; names both."""


def settings_hash(settings: dict[str, Any]) -> str:
    """Short sha256 of the settings' canonical JSON (sorted keys, no whitespace)."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_LENGTH]


def _staleness_limit(config: dict[str, Any], suite: Suite, backend: str) -> int:
    from . import backends

    fn = backends.get(backend).staleness_limit
    return 0 if fn is None else int(fn(config, suite))  # no limit declared: its rollout never runs ahead


def workload_scale(suite_settings: dict[str, Any], workload: str) -> float:
    """The scale a workload runs at: the suite's `workload_scale` entry, else its `scale`."""
    return float((suite_settings.get("workload_scale") or {}).get(workload, suite_settings["scale"]))


def resolve_settings(config: dict[str, Any], suite_name: str | None = None) -> dict[str, Any]:
    """The hashed settings of one suite of a validated config, less its probes (build_spec adds them)."""
    suite = get_suite(config, suite_name)
    s = copy.deepcopy(suite.settings)
    contract = dict(s.pop("contract"))
    if "extra_offered_updates" not in contract:
        contract["extra_offered_updates"] = max(_staleness_limit(config, suite, b) for b in s["backends"])
    for key in _UNHASHED_SUITE_KEYS:
        s.pop(key, None)
    s.pop("probes", None)  # the suite's overrides, resolved below with the defaults
    workloads = {}
    for w in s["workloads"]:
        dist = {k: v for k, v in copy.deepcopy(config["workloads"][w]).items() if k != "description"}
        workloads[w] = dist
    return {
        "suite": suite.name,
        **s,
        "workload_scale": {w: workload_scale(suite.settings, w) for w in s["workloads"]},
        "contract": contract,
        "seed": int(config["seed"]),
        "model": _model_settings(config, s["model"]),
        "workload_distributions": workloads,
        # A backend's own settings live in a top-level config section named after it.
        "backend_settings": {b: copy.deepcopy(config[b]) for b in s["backends"] if isinstance(config.get(b), dict)},
    }


def _model_settings(config: dict[str, Any], name: str) -> dict[str, Any]:
    """The model's config entry; a locally built model also carries its build config's sha256
    (the file, not only its path, decides the weights)."""
    model = {"name": name, **copy.deepcopy(config["models"][name])}
    if model.get("build_config"):
        from .paths import ROOT

        path = Path(model["build_config"])
        path = path if path.is_absolute() else ROOT / path
        try:
            model["build_config_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise ConfigError(f"config key 'models/{name}/build_config': cannot read {path} ({exc})") from None
    return model


def _about(config: dict[str, Any], suite: Suite, probe_placement: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": suite.get("description"),
        "workload_descriptions": {w: config["workloads"][w].get("description") for w in suite["workloads"]},
        "gpu_sets": list(suite.get("gpu_sets") or []),
        "probes": probe_placement,  # probe directories and time limits
    }


def build_spec(config: dict[str, Any], suite_name: str | None = None) -> dict[str, Any]:
    """The spec document of one suite: schema, id, hash, hashed settings, unhashed `about`."""
    from .probes.settings import probe_settings, split_for_spec

    settings = resolve_settings(config, suite_name)
    suite = get_suite(config, settings["suite"])
    # What the probes measure with (the telemetry sampler beside every run included) is
    # hashed; where they write and how long they may take is not.
    settings["probes"], probe_placement = split_for_spec(probe_settings(config, suite.settings))
    digest = settings_hash(settings)
    return {"schema": SPEC_SCHEMA, "id": f"{suite.name}-{digest}", "hash": digest,
            "settings": settings, "about": _about(config, suite, probe_placement)}


@dataclass(frozen=True)
class RunSpec:
    """A checked spec document, with the views the jobs need."""

    doc: dict[str, Any]
    path: Path | None = None

    @property
    def id(self) -> str:
        return self.doc["id"]

    @property
    def hash(self) -> str:
        return self.doc["hash"]

    @property
    def settings(self) -> dict[str, Any]:
        return self.doc["settings"]

    @property
    def suite_name(self) -> str:
        return self.settings["suite"]

    @property
    def contract(self) -> dict[str, int]:
        return dict(self.settings["contract"])

    @property
    def probes(self) -> dict[str, dict[str, Any]]:
        """Resolved probe settings: the hashed ones with the placement (directories, timeouts) from `about`."""
        from .probes.settings import join_from_spec

        if "probes" not in self.settings:
            raise SpecError(f"spec {self.id} has no probe settings (written before they were part of the spec); "
                            "delete the spec file and let the workflow rewrite it")
        return join_from_spec(self.settings["probes"], (self.doc.get("about") or {}).get("probes") or {})

    @property
    def trained_updates(self) -> int:
        """N = warmup + measured: the updates a run trains and the contract counts."""
        return int(self.contract["warmup_updates"]) + int(self.contract["measured_updates"])

    @property
    def offered_updates(self) -> int:
        """N + extra_offered_updates: the updates of the offered plan."""
        return self.trained_updates + int(self.contract["extra_offered_updates"])

    def as_config(self) -> dict[str, Any]:
        """A validated config holding only this suite, built from the spec alone.

        The package's code (runner, topology, backends) takes a config and a Suite;
        this is the one bridge, so nothing has to read config.yaml.
        """
        s = copy.deepcopy(self.settings)
        name = s.pop("suite")
        model = s.pop("model")
        distributions = s.pop("workload_distributions")
        backend_settings = s.pop("backend_settings")
        seed = s.pop("seed")
        probes = self.probes
        s.pop("probes")
        s["model"] = model.pop("name")
        model.pop("build_config_sha256", None)  # derived from the file, not a config key
        s["contract"] = {k: v for k, v in s["contract"].items()}
        about = self.doc.get("about") or {}
        if about.get("description"):
            s["description"] = about["description"]
        if about.get("gpu_sets"):
            s["gpu_sets"] = list(about["gpu_sets"])
        workloads = {}
        for w, dist in distributions.items():
            desc = (about.get("workload_descriptions") or {}).get(w)
            workloads[w] = {**dist, **({"description": desc} if desc else {})}
        from .probes.settings import config_section

        config = {"suite": name, "seed": seed, "suites": {name: s}, "models": {s["model"]: model},
                  "workloads": workloads, "probes": config_section(probes), **backend_settings}
        # The schema requires the section even for framework suites; the checkpoint probe's
        # adapter shape is the one bit of it every suite resolves.
        config.setdefault("reference", {k: probes["checkpoint"][k] for k in ("lora_rank", "lora_alpha")})
        return validate_config(config)

    def suite(self) -> Suite:
        return get_suite(self.as_config(), self.suite_name)


def check_spec(doc: Any, where: str = "spec") -> RunSpec:
    """Check a spec document's schema and that its hash is the hash of its settings."""
    if not isinstance(doc, dict) or doc.get("schema") != SPEC_SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise SpecError(f"{where}: schema {got!r}, expected {SPEC_SCHEMA!r}")
    missing = [k for k in ("id", "hash", "settings") if k not in doc]
    if missing:
        raise SpecError(f"{where}: lacks {', '.join(missing)}")
    if not isinstance(doc["settings"], dict) or "suite" not in doc["settings"]:
        raise SpecError(f"{where}: 'settings' is not a suite's settings object")
    actual = settings_hash(doc["settings"])
    if doc["hash"] != actual:
        raise SpecError(f"{where}: records hash {doc['hash']} but its settings hash to {actual}; "
                        "the file was edited or corrupted (delete it and let the workflow rewrite it)")
    expected_id = f"{doc['settings']['suite']}-{actual}"
    if doc["id"] != expected_id:
        raise SpecError(f"{where}: records id {doc['id']!r}, its settings give {expected_id!r}")
    return RunSpec(doc)


def load_spec(path: Path | str) -> RunSpec:
    """Read and check a spec file; a file named like a spec id must carry that id's hash."""
    from .paths import NotARegularFile, require_regular_file

    path = Path(path)
    try:
        require_regular_file(path, "run spec")
        doc = json.loads(path.read_text(encoding="utf-8"))
    except NotARegularFile as exc:
        raise SpecError(str(exc)) from None
    except FileNotFoundError:
        from .paths import spec_file

        raise SpecError(f"run spec {path} does not exist; the workflow writes it "
                        f"(`uv run snakemake --cores 1 {spec_file('SUITE-HASH')}`, see `bench plan`)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"run spec {path} is not readable JSON: {exc}") from None
    from .spec_schema import validate_spec_settings

    validate_spec_settings(doc, where=f"run spec {path}")  # a recomputed hash proves nothing about the values
    spec = check_spec(doc, where=f"run spec {path}")
    named = SPEC_ID.match(path.stem)
    if named and path.stem != spec.id:
        raise SpecError(f"run spec {path}: its file name names spec {path.stem} (hash {named['hash']}) "
                        f"but its settings are spec {spec.id} (hash {spec.hash})")
    return RunSpec(spec.doc, path)


def write_spec(doc: dict[str, Any], path: Path | str) -> RunSpec:
    """Check and write a spec document atomically."""
    from .atomicfile import atomic_write_json

    path = Path(path)
    spec = check_spec(doc, where=f"spec for {path}")
    if SPEC_ID.match(path.stem) and path.stem != spec.id:
        raise SpecError(f"refusing to write spec {spec.id} (hash {spec.hash}) to {path}, "
                        f"whose name says hash {SPEC_ID.match(path.stem)['hash']}")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, spec.doc)
    return RunSpec(spec.doc, path)


def check_evidence_spec(manifest: dict[str, Any] | None, spec: RunSpec, where: str) -> None:
    """Evidence must name the spec it is read under; raise naming both hashes otherwise."""
    named = (manifest or {}).get("spec") if isinstance(manifest, dict) else None
    got = named.get("hash") if isinstance(named, dict) else None
    if got != spec.hash:
        shown = f"spec hash {got}" if got else "no spec hash"
        raise SpecError(f"{where}: the evidence manifest names {shown}, but it is read under spec "
                        f"{spec.id} (hash {spec.hash})")


def check_run_spec(record: dict, run_json: Path, evidence_dir: Path, spec_path: str | Path) -> None:
    """The run record and its evidence manifest must both name the spec's hash (SpecError naming both)."""
    spec = load_spec(spec_path)
    if record.get("spec_hash") != spec.hash:
        raise SpecError(f"{run_json} names spec hash {record.get('spec_hash')}, but it is summarized under spec "
                        f"{spec.id} (hash {spec.hash})")
    try:
        manifest = json.loads((evidence_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # an unreadable manifest is the summary's finding (manifest_missing / manifest_corrupt)
    check_evidence_spec(manifest, spec, where=f"evidence {evidence_dir}")


def spec_from_config_file(config_path: Path | str, suite: str | None = None,
                          overrides: dict[str, Any] | None = None, configfiles=()) -> RunSpec:
    """Outside a workflow (`bench run` by hand): resolve the spec from a config file."""
    from .config import load_config

    return check_spec(build_spec(load_config(config_path, overrides, configfiles), suite))

