"""`bench run` (one benchmark run) and `bench plan` (what a suite would run)."""

from __future__ import annotations

import json
from pathlib import Path

from ..config import ConfigError, get_suite, load_config
from ..paths import CONFIG_PATH, ROOT


def _parse_overrides(items: list[str]) -> dict:
    import yaml

    out = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got '{item}'")
        key, value = item.split("=", 1)
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError:  # the value itself is not repeated: it may be a secret
            raise ConfigError(f"--set {key}=...: the value is not valid YAML") from None
    return out


def _add_config_args(p) -> None:
    p.add_argument("--config", type=Path, default=CONFIG_PATH, help="config file (default: %(default)s)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="top-level config override, like snakemake --config KEY=VALUE")


def cmd_run(args) -> int:
    from ..runner import execute_run

    config = load_config(args.config, _parse_overrides(args.set))
    suite = get_suite(config, args.suite)
    model_record = args.model_record or ROOT / "results" / "models" / f"{suite['model']}.json"
    return execute_run(
        config, suite, args.backend, args.workload, args.trial,
        model_record=Path(model_record), plan_path=args.plan, run_json=args.run_json,
        recipe_record=args.recipe_record, source_record=args.source_record, image_record=args.image_record,
        evidence_dir_root=args.evidence_root,
    )


def cmd_plan(args) -> int:
    config = load_config(args.config, _parse_overrides(args.set))
    suite = get_suite(config, args.suite)
    runs = [
        {"suite": suite.name, "backend": b, "workload": w, "trial": t,
         "target": f"results/runs/{suite.name}/{b}/{w}/trial{t}/run.json"}
        for b in suite["backends"] for w in suite["workloads"] for t in range(1, suite["trials"] + 1)
    ]
    if args.json:
        print(json.dumps({"suite": suite.name, "settings": suite.settings, "runs": runs}, indent=2))
        return 0
    s = suite.settings
    c = suite.contract
    print(f"suite {suite.name}: {s.get('description', '').strip()}")
    print(f"  backends={','.join(s['backends'])} runtime={s['runtime']} device={s['device']} gpus={s['gpus']} "
          f"scale={s['scale']} model={s['model']}")
    print(f"  contract: {c['warmup_updates']} warmup + {c['measured_updates']} measured updates, "
          f"headline = last {c['headline_updates']}")
    for r in runs:
        print(f"  {r['backend']:<10} {r['workload']:<18} trial{r['trial']}  -> {r['target']}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("run", help="run one benchmark (fresh evidence directory every time)")
    _add_config_args(p)
    p.add_argument("--suite", default=None, help="suite name (default: config 'suite')")
    p.add_argument("--backend", required=True, help="a registered backend of the suite")
    p.add_argument("--workload", required=True)
    p.add_argument("--trial", type=int, default=1)
    p.add_argument("--model-record", type=Path, default=None, help="results/models/{model}.json")
    p.add_argument("--plan", type=Path, default=None, help="offered plan parquet (computed if absent)")
    p.add_argument("--run-json", type=Path, default=None, help="where to write run.json on success")
    p.add_argument("--recipe-record", type=Path, default=None)
    p.add_argument("--source-record", type=Path, default=None)
    p.add_argument("--image-record", type=Path, default=None)
    p.add_argument("--evidence-root", type=Path, default=None, help="default: results/evidence")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("plan", help="list the runs a suite contains and its contract")
    _add_config_args(p)
    p.add_argument("--suite", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)
