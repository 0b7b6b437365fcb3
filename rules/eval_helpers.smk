# Helpers of rules/eval.smk (and of the report's and tracking's eval inputs): evaluation targets
# come from rl_pipeline_bench.eval.targets; a ConfigError becomes one WorkflowError line.


#: Snakemake wildcard constraint of an eval settings hash (rl_pipeline_bench.eval.spec).
EVAL_HASH_PATTERN = rf"[0-9a-f]{{{HASH_LENGTH}}}"


def _eval_call(fn, *args, **kwargs):
    try:
        return fn(config, *args, **kwargs)
    except ConfigError as exc:
        raise WorkflowError(str(exc))


def eval_settings_json(esuite):
    return json.dumps((config.get("eval_suites") or {}).get(esuite), sort_keys=True)


def eval_workers(esuite):
    return _eval_call(eval_targets.resolved, esuite)["workers"]


def eval_gpus(esuite):
    return _eval_call(eval_targets.resolved, esuite)["gpus"]


def eval_summaries(esuite, require=True):
    return _eval_call(eval_targets.summaries, esuite, require=require)


def eval_run_inputs(wildcards):
    return _eval_call(eval_targets.run_pointers, wildcards.esuite, wildcards.policy)


def eval_run_dirs(wildcards):
    """The evaluation runs' directories (see record_dirs): a deleted eval.json is evaluated again."""
    return record_dirs([os.path.dirname(p) for p in eval_run_inputs(wildcards)])


def eval_user_args(wildcards):
    """Paths the user brought, as `bench eval run` options (only those that are set)."""
    args = []
    ckpt = _eval_call(eval_targets.checkpoint_path, wildcards.policy)
    for flag, value in (("--checkpoint", ckpt), ("--entry-point", config.get("eval_policy_entry_point")),
                        ("--libero-assets", config.get("libero_assets")),
                        ("--robotwin-assets", config.get("robotwin_assets"))):
        if value:
            args += [flag, str(value)]
    return shlex.join(args)


def eval_lease_prefix(wildcards):
    settings = _eval_call(eval_targets.resolved, wildcards.esuite)
    if settings["gpus"] == 0:
        return ""
    from rl_pipeline_bench.leases import lease_command

    run_id = f"eval-{wildcards.esuite}-{wildcards.policy}-run{wildcards.run}"
    return shlex.join(lease_command(settings["gpu_sets"], settings["gpus"], run_id)) + " "
