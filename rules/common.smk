# Helpers shared by the rules: the selected suite and the file names it expands to.

import shlex

from rl_pipeline_bench.config import ConfigError, get_suite, safe_name_regex, validate_config

try:
    validate_config(config)
except ConfigError as exc:
    raise WorkflowError(str(exc))


# A wildcard that becomes a path component must be a safe name (the schema's $defs/name),
# so no target can make a rule write outside results/ (e.g. a workload of "../../x").
wildcard_constraints:
    suite=safe_name_regex(),
    backend=safe_name_regex(),
    workload=safe_name_regex(),
    model=safe_name_regex(),

SUITE = get_suite(config)


def _check_topology(suite):
    """Refuse, at DAG time, a suite its backends' descriptors cannot run (device, GPUs, model, topology)."""
    from rl_pipeline_bench.topology import preflight as topology_preflight

    for backend in suite["backends"]:
        try:
            topology_preflight(config, suite, backend)
        except ConfigError as exc:
            raise WorkflowError(str(exc))


_check_topology(SUITE)


def suite_settings(name):
    try:
        return get_suite(config, name)
    except ConfigError as exc:
        raise WorkflowError(str(exc))


def model_record(wildcards):
    return f"results/models/{suite_settings(wildcards.suite)['model']}.json"


def suite_runs(suite):
    """Every (backend, workload, trial) of a suite, as run directories."""
    return [
        f"results/runs/{suite.name}/{b}/{w}/trial{t}"
        for b in suite["backends"]
        for w in suite["workloads"]
        for t in range(1, suite["trials"] + 1)
    ]


def suite_summaries(suite):
    return [f"{d}/summary.json" for d in suite_runs(suite)]


def suite_plans(suite):
    return [f"results/workloads/{suite.name}/{w}.parquet" for w in suite["workloads"]]


def suite_offered_figures(suite):
    """The plans' offered-length figures, in the order of suite_plans."""
    return [f"results/workloads/{suite.name}/{w}.offered.png" for w in suite["workloads"]]


def run_inputs(wildcards):
    suite = suite_settings(wildcards.suite)
    inputs = {
        "model": ancient(model_record(wildcards)),
        "plan": ancient(f"results/workloads/{suite.name}/{wildcards.workload}.parquet"),
        "recipe": ancient(f"results/provenance/recipes/{wildcards.backend}.json"),
        "source": ancient("results/provenance/source.json"),
    }
    if suite["runtime"] == "container":
        inputs["image"] = ancient(f"results/images/{wildcards.backend}.json")
    return inputs


def image_args(wildcards, input):
    return f"--image-record {input.image}" if "image" in input.keys() else ""


def lease_prefix(wildcards):
    """`bench lease run ... --` for GPU suites; nothing for CPU suites."""
    suite = suite_settings(wildcards.suite)
    if suite["gpus"] == 0:
        return ""
    from rl_pipeline_bench.leases import lease_command

    run_id = f"{suite.name}-{wildcards.backend}-{wildcards.workload}-trial{wildcards.trial}"
    return shlex.join(lease_command(suite.get("gpu_sets") or [], suite["gpus"], run_id)) + " "


# -- evaluation (rules/eval.smk): targets come from rl_pipeline_bench.eval.targets ------

import json as _json

from rl_pipeline_bench.eval import targets as _eval_targets


def _eval_call(fn, *args, **kwargs):
    try:
        return fn(config, *args, **kwargs)
    except ConfigError as exc:
        raise WorkflowError(str(exc))


def eval_settings_json(esuite):
    return _json.dumps((config.get("eval_suites") or {}).get(esuite), sort_keys=True)


def eval_workers(esuite):
    return _eval_call(_eval_targets.resolved, esuite)["workers"]


def eval_gpus(esuite):
    return _eval_call(_eval_targets.resolved, esuite)["gpus"]


def eval_summaries(esuite, require=True):
    return _eval_call(_eval_targets.summaries, esuite, require=require)


def eval_run_inputs(wildcards):
    return _eval_call(_eval_targets.run_pointers, wildcards.esuite, wildcards.policy)


def eval_user_args(wildcards):
    """Paths the user brought, as `bench eval run` options (only those that are set)."""
    args = []
    ckpt = _eval_call(_eval_targets.checkpoint_path, wildcards.policy)
    for flag, value in (("--checkpoint", ckpt), ("--entry-point", config.get("eval_policy_entry_point")),
                        ("--libero-assets", config.get("libero_assets")),
                        ("--robotwin-assets", config.get("robotwin_assets"))):
        if value:
            args += [flag, str(value)]
    return shlex.join(args)


def eval_lease_prefix(wildcards):
    settings = _eval_call(_eval_targets.resolved, wildcards.esuite)
    if settings["gpus"] == 0:
        return ""
    from rl_pipeline_bench.leases import lease_command

    run_id = f"eval-{wildcards.esuite}-{wildcards.policy}-run{wildcards.run}"
    return shlex.join(lease_command(settings["gpu_sets"], settings["gpus"], run_id)) + " "
