# Helpers shared by the rules: the resolved run specs and the file names they expand to.
#
# Every suite of the (already merged: config.yaml + --configfile + --config) config is
# resolved into a run spec keyed by a hash of its settings (rl_pipeline_bench.settings.spec,
# docs/run-spec.md). Plans and runs live under results/{workloads,runs}/{suite}-{hash}/,
# so an edited setting makes new targets and identical settings find finished ones. Every
# path comes from rl_pipeline_bench.paths (the one results layout), as do the rules' outputs.


include: "imports.smk"


try:
    validate_config(config)
    SPECS = {doc["id"]: doc for doc in (build_spec(config, name) for name in config["suites"])}
except ConfigError as exc:
    raise WorkflowError(str(exc))


# A wildcard that becomes a path component must be a safe name (the schema's $defs/name),
# so no target can make a rule write outside results/ (e.g. a workload of "../../x").
SAFE_NAME = safe_name_regex()


wildcard_constraints:
    suite=SAFE_NAME,
    backend=SAFE_NAME,
    workload=SAFE_NAME,
    model=SAFE_NAME,

SUITE = get_suite(config)
SPEC_ID = next(i for i, doc in SPECS.items() if doc["settings"]["suite"] == SUITE.name)
#: Every attempt's events (rl_pipeline_bench.evidence.attempts), appended to by runs and summaries.
#: No job outputs it (Snakemake would delete it before re-running that job).
ATTEMPTS_INDEX = paths.ATTEMPTS_INDEX
#: A grep pattern for the lines of a running benchmark that reach the terminal (rules/runs.smk).
PROGRESS_LINES = f"^{progress_prefix}"


wildcard_constraints:
    spec=SPEC_ID_PATTERN,
    trial=r"\d+",


def _ensure_attempts_index():
    """An empty index when there is none yet (an empty index reads as no attempts), so the report's
    input list is the same before and after the first run (a list that grew by the index made the
    next invocation re-render the report). Made while the workflow is read, before the DAG: a
    cluster executor takes its file inventory first and would miss an index made later."""
    os.makedirs(os.path.dirname(ATTEMPTS_INDEX), exist_ok=True)
    with open(ATTEMPTS_INDEX, "a", encoding="utf-8"):  # appending nothing keeps its time
        pass


_ensure_attempts_index()


def attempts_index_input(wildcards):
    """The index as a report input: a new attempt makes the report out of date."""
    return [ATTEMPTS_INDEX]


def _check_topology(spec):
    """Refuse, at DAG time, a suite its backends' descriptors cannot run (device, GPUs, model, topology)."""
    from rl_pipeline_bench.backends.suite_checks import preflight as topology_preflight

    for backend in spec.backends:
        try:
            topology_preflight(spec, backend)
        except ConfigError as exc:
            raise WorkflowError(str(exc))


_check_topology(RunSpec(SPECS[SPEC_ID]))


def model_inputs(wildcards):
    """rules/model.smk: a local model's build inputs (a hub model's download waits for rules/readiness.smk)."""
    return model_rule_params(config, wildcards.model)["inputs"]


def spec_file(spec_id):
    return str(paths.spec_file(spec_id))


def spec_doc(spec_id):
    """A spec of this config, or an older spec's file that is still on disk (its runs stay usable)."""
    if spec_id in SPECS:
        return SPECS[spec_id]
    try:
        return load_spec(spec_file(spec_id)).doc
    except SpecError as exc:
        known = ", ".join(sorted(SPECS))
        raise WorkflowError(f"spec {spec_id} is not the spec of any suite of this config (known: {known}) "
                            f"and its file cannot be used: {exc}")


def spec_settings(wildcards):
    return spec_doc(wildcards.spec)["settings"]


def model_record(wildcards):
    return str(paths.model_record(spec_settings(wildcards)["model"]["name"]))


def spec_run_files(spec_id, pattern):
    """One file per run of the spec (trials as this config asks), from a run-directory pattern of rl_pipeline_bench.paths."""
    return [pattern.format(**t._asdict()) for t in spec_run_targets(spec_id)]


def spec_run_targets(spec_id):
    """Every (spec, backend, workload, trial) of a spec, the trial count as this config asks (not hashed)."""
    spec = RunSpec(SPECS[spec_id])
    return paths.run_targets(spec_id, spec.backends, spec.workloads, spec.trials)


def spec_summaries(spec_id):
    return spec_run_files(spec_id, paths.RUN_SUMMARY)


def spec_plans(spec_id):
    return [str(paths.plan_file(spec_id, w)) for w in SPECS[spec_id]["settings"]["workloads"]]


def spec_offered_figures(spec_id):
    """The plans' offered-length figures, in the order of spec_plans."""
    return [str(paths.offered_figure(spec_id, w)) for w in SPECS[spec_id]["settings"]["workloads"]]


def run_inputs(wildcards):
    # ancient(): a run is never re-executed because an input was rewritten; only a
    # missing run.json (or a new spec hash, which is a new path) makes a run.
    inputs = {
        "spec": ancient(spec_file(wildcards.spec)),
        "model": ancient(model_record(wildcards)),
        "plan": ancient(str(paths.plan_file(wildcards.spec, wildcards.workload))),
        "recipe": ancient(str(paths.recipe_record(wildcards.backend))),
        "source": ancient(str(paths.source_record())),
    }
    if spec_settings(wildcards)["runtime"] == "container":
        inputs["image"] = ancient(str(paths.image_record(wildcards.backend)))
    return inputs


def report_provenance_inputs(wildcards):
    """Every provenance record the selected spec's runs read: source, recipes, model, images."""
    s = SPECS[SPEC_ID]["settings"]
    files = [paths.source_record(), paths.model_record(s["model"]["name"])]
    files += [paths.recipe_record(b) for b in s["backends"]]
    if s["runtime"] == "container":
        files += [paths.image_record(b) for b in s["backends"]]
    return [str(f) for f in files]


def image_args(wildcards, input):
    return f"--image-record {input.image}" if "image" in input.keys() else ""


def lease_prefix(wildcards):
    """`bench lease run ... --` for GPU suites; nothing for CPU suites."""
    return spec_lease_prefix(
        wildcards.spec, f"{wildcards.spec}-{wildcards.backend}-{wildcards.workload}-trial{wildcards.trial}")


def spec_lease_prefix(spec_id, run_id):
    """The lease over the spec's GPU set (its gpu_sets, the config's memory threshold) for one job."""
    doc = spec_doc(spec_id)
    gpus = doc["settings"]["gpus"]
    if gpus == 0:
        return ""
    from rl_pipeline_bench.leases import lease_command

    threshold = (config.get("lease") or {}).get("memory_threshold_mib")
    return shlex.join(lease_command(doc["about"].get("gpu_sets") or [], gpus, run_id,
                                    memory_threshold_mib=threshold)) + " "



def record_dirs(dirs):
    """Directories holding derived or measured records, as inputs: deleting a record makes them new.

    Snakemake never re-makes a missing file whose consumers are up to date (missing inputs
    have no time). Deleting a file does change its directory's mtime, so with the directory
    as an input the consumer is out of date and Snakemake re-makes what is missing in it:
    a deleted summary.json, infra.json, probe record or eval.json comes back when the
    report is asked for (README, docs/probes.md). A deleted run.json alone re-renders the
    report from the summary that is still there and re-runs nothing. The directories are
    made here, before any job, so the input list is the same before and after the runs
    that fill them (an input list that changes re-renders the report once more).
    """
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    return list(dirs)


def spec_record_dirs(spec_id):
    """Every run directory of a spec and its probe directory (see record_dirs)."""
    runs = [str(paths.run_dir(*t)) for t in spec_run_targets(spec_id)]
    return record_dirs(runs + sorted({os.path.dirname(p) for p in spec_probes(spec_id)}))


def spec_run_infra(spec_id):
    """Every run's infrastructure summary (telemetry per phase, MFU), beside its summary.json."""
    return spec_run_files(spec_id, paths.RUN_INFRA)


def flops_card(wildcards):
    return str(paths.flops_card(spec_settings(wildcards)["model"]["name"]))
