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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..records.configfile import ConfigError, get_suite
from ..contract.settings import ContractSettings
from ..records.settings_hash import HASH_LENGTH, settings_hash
from ..records.formats import schema_of
from ..records.jsonfile import JsonFileError, read_json

SPEC_SCHEMA = schema_of("run-spec")
SPEC_ID = re.compile(rf"^(?P<suite>.+)-(?P<hash>[0-9a-f]{{{HASH_LENGTH}}})$")
#: Snakemake wildcard constraint of a spec id.
SPEC_ID_PATTERN = rf"[^/]+-[0-9a-f]{{{HASH_LENGTH}}}"

#: Suite keys that describe or place a run, or say how many trials to make, without
#: changing any run's work: recorded under `about`, not hashed. `trials` is among them so
#: that asking for more trials adds runs beside the finished ones (trial n of a spec is
#: the same work whatever the trial count).
_UNHASHED_SUITE_KEYS = ("description", "gpu_sets", "gpu_kind", "trials")


class SpecError(ConfigError):
    """A spec file that is unreadable, malformed, or does not match its hash; names both."""


def workload_scale(suite_settings: dict[str, Any], workload: str) -> float:
    """The scale a workload runs at: the suite's `workload_scale` entry, else its `scale`."""
    return float((suite_settings.get("workload_scale") or {}).get(workload, suite_settings["scale"]))


def resolve_settings(config: dict[str, Any], suite_name: str | None = None) -> dict[str, Any]:
    """The hashed settings of one suite of a validated config, less its probes (build_spec adds them)."""
    from ..backends.plan_capacity import extra_updates_wanted

    suite = get_suite(config, suite_name)
    s = copy.deepcopy(suite.settings)
    given = s.pop("contract", None) or {}
    contract = ContractSettings.with_defaults(given).settings()
    for key in _UNHASHED_SUITE_KEYS:
        s.pop(key, None)
    s.pop("probes", None)  # the suite's overrides, resolved below with the defaults
    workloads = {}
    for w in s["workloads"]:
        dist = {k: v for k, v in copy.deepcopy(config["workloads"][w]).items() if k != "description"}
        workloads[w] = dist
    settings = {
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
    if "extra_offered_updates" in given:
        contract["extra_offered_updates"] = int(given["extra_offered_updates"])
    else:  # what the suite's backends take of each workload's plan (backends/plan_capacity.py)
        contract["extra_offered_updates"] = extra_updates_wanted(RunSpec({"settings": settings}), s["backends"])
    return settings


def _model_settings(config: dict[str, Any], name: str) -> dict[str, Any]:
    """The model's config entry; a locally built model also carries its build config's sha256
    (the file, not only its path, decides the weights)."""
    model = {"name": name, **copy.deepcopy(config["models"][name])}
    if model.get("build_config"):
        from ..paths import ROOT

        path = Path(model["build_config"])
        path = path if path.is_absolute() else ROOT / path
        try:
            model["build_config_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise ConfigError(f"config key 'models/{name}/build_config': cannot read {path} ({exc})") from None
    return model


def _about(config: dict[str, Any], suite, probe_placement: dict[str, Any]) -> dict[str, Any]:
    return {
        "trials": int(suite["trials"]),
        "description": suite.get("description"),
        "workload_descriptions": {w: config["workloads"][w].get("description") for w in suite["workloads"]},
        "gpu_sets": list(suite.get("gpu_sets") or []),
        "gpu_kind": suite.get("gpu_kind"),
        "probes": probe_placement,  # probe directories and time limits
    }


def build_spec(config: dict[str, Any], suite_name: str | None = None) -> dict[str, Any]:
    """The spec document of one suite: schema, id, hash, hashed settings, unhashed `about`."""
    from ..probes.settings import probe_settings, split_for_spec

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
    """A checked spec document, with the typed views every job and backend reads.

    This is the one shape of a suite's settings after resolution: topology checks, the
    runner, backends' `run(ctx)` (ctx.run_spec), their config builders and the report
    take it; nothing turns it back into a config.
    """

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
    def about(self) -> dict[str, Any]:
        return self.doc.get("about") or {}

    @property
    def suite_name(self) -> str:
        return self.settings["suite"]

    def get(self, key: str, default: Any = None) -> Any:
        """A suite setting by its config key (e.g. a backend's own suite key such as `rank`)."""
        return self.settings.get(key, default)

    @property
    def contract(self) -> ContractSettings:
        return ContractSettings.from_mapping(self.settings["contract"])

    @property
    def extra_offered_updates(self) -> int:
        return int(self.settings["contract"]["extra_offered_updates"])

    @property
    def backends(self) -> list[str]:
        return list(self.settings["backends"])

    @property
    def workloads(self) -> list[str]:
        return list(self.settings["workloads"])

    @property
    def trials(self) -> int:
        """Trials asked for when the spec was resolved (unhashed; a spec written before that
        change keeps it among its hashed settings)."""
        return int(self.settings.get("trials", self.about.get("trials", 1)))

    @property
    def runtime(self) -> str:
        return self.settings["runtime"]

    @property
    def device(self) -> str:
        return self.settings["device"]

    @property
    def gpus(self) -> int:
        return int(self.settings["gpus"])

    @property
    def gpu_sets(self) -> list[str]:
        return list(self.about.get("gpu_sets") or [])

    @property
    def seed(self) -> int:
        return int(self.settings["seed"])

    @property
    def model(self) -> dict[str, Any]:
        """The model's settings: `name`, `source`, `repo_id`, `revision` or `build_config`."""
        return dict(self.settings["model"])

    def backend_settings(self, backend: str) -> dict[str, Any]:
        """A backend's own top-level config section as resolved ({} when it has none)."""
        return copy.deepcopy((self.settings.get("backend_settings") or {}).get(backend) or {})

    @property
    def probes(self) -> dict[str, dict[str, Any]]:
        """Resolved probe settings: the hashed ones with the placement (directories, timeouts) from `about`."""
        from ..probes.settings import join_from_spec

        if "probes" not in self.settings:
            raise SpecError(f"spec {self.id} has no probe settings (written before they were part of the spec); "
                            "delete the spec file and let the workflow rewrite it")
        return join_from_spec(self.settings["probes"], self.about.get("probes") or {})

    @property
    def trained_updates(self) -> int:
        """N = warmup + measured: the updates a run trains and the contract counts."""
        return self.contract.total_updates

    @property
    def offered_updates(self) -> int:
        """N + extra_offered_updates: the updates of the offered plan."""
        return self.trained_updates + self.extra_offered_updates


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
    from ..paths import spec_file

    path = Path(path)
    # not strict: a NaN is named with its key by the schema check below
    doc = read_json(path, "run spec", SpecError,
                    hint=f"The workflow writes it (`uv run snakemake --cores 1 {spec_file('SUITE-HASH')}`, see `bench plan`)")
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
    from ..records.atomicfile import atomic_write_json

    path = Path(path)
    spec = check_spec(doc, where=f"spec for {path}")
    if SPEC_ID.match(path.stem) and path.stem != spec.id:
        raise SpecError(f"refusing to write spec {spec.id} (hash {spec.hash}) to {path}, "
                        f"whose name says hash {SPEC_ID.match(path.stem)['hash']}")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, spec.doc)
    return RunSpec(spec.doc, path)


def named_spec(manifest: Mapping[str, Any] | None, root: Path | str | None = None) -> RunSpec | None:
    """The spec a manifest names, from the results tree at `root` (paths.spec_file) or the path it
    recorded; None when neither holds that spec (a summary of a directory by hand is then unchecked)."""
    from ..paths import spec_file

    named = manifest.get("spec") if isinstance(manifest, Mapping) else None
    if not isinstance(named, Mapping) or not isinstance(named.get("id"), str) or not SPEC_ID.match(named["id"]) \
            or "/" in named["id"]:
        return None
    candidates = [spec_file(named["id"], root)]
    if isinstance(named.get("path"), str):
        candidates.append(Path(named["path"]))
    for path in candidates:
        if path.is_file():
            spec = load_spec(path)
            return spec if spec.hash == named.get("hash") else None
    return None


def check_evidence_spec(manifest: dict[str, Any] | None, spec: RunSpec, where: str) -> None:
    """Evidence must name the spec it is read under; raise naming both hashes otherwise."""
    named = (manifest or {}).get("spec") if isinstance(manifest, dict) else None
    got = named.get("hash") if isinstance(named, dict) else None
    if got != spec.hash:
        shown = f"spec hash {got}" if got else "no spec hash"
        raise SpecError(f"{where}: the evidence manifest names {shown}, but it is read under spec "
                        f"{spec.id} (hash {spec.hash})")


def check_run_spec(record: dict, run_json: Path, evidence_dir: Path, spec: RunSpec) -> None:
    """The run record and its evidence manifest must both name the spec's hash (SpecError naming both)."""
    if record.get("spec_hash") != spec.hash:
        raise SpecError(f"{run_json} names spec hash {record.get('spec_hash')}, but it is summarized under spec "
                        f"{spec.id} (hash {spec.hash})")
    try:
        manifest = read_json(evidence_dir / "manifest.json", "manifest", strict=True)
    except JsonFileError:
        return  # an unreadable manifest is the summary's finding (manifest_missing / manifest_corrupt)
    check_evidence_spec(manifest, spec, where=f"evidence {evidence_dir}")


def spec_from_config_file(config_path: Path | str, suite: str | None = None,
                          overrides: dict[str, Any] | None = None, configfiles=()) -> RunSpec:
    """Outside a workflow (`bench run` by hand): resolve the spec from a config file."""
    from .config import load_config

    return check_spec(build_spec(load_config(config_path, overrides, configfiles), suite))

