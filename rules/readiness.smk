# Readiness: once the DAG is built and before its first job, whether this machine can run
# the jobs Snakemake is about to start (rl_pipeline_bench.runs.readiness). Jobs that take
# GPUs need those GPUs, an image build or a container run needs a container engine, and a
# Hub model that is not in HF_HOME needs the Hub and the disk for it. Every problem is
# printed in one block, each with its fix, and nothing starts. Snakemake calls onstart only
# when jobs are to run and never in a dry run, so `snakemake -n` plans on any machine.


def readiness_needs(jobs):
    """(GPU suites, engine needed, models to download) of the jobs about to run."""
    from rl_pipeline_bench.models.snapshots import snapshot_dir

    gpu_suites, engine, downloads = {}, False, {}
    for job in jobs:
        wc = job.wildcards_dict
        gpus = int(job.resources.get("gpu", 0) or 0)
        if gpus and "spec" in wc:
            doc = spec_doc(wc["spec"])
            about = doc.get("about") or {}
            gpu_suites[wc["spec"]] = {"gpus": doc["settings"]["gpus"], "gpu_sets": about.get("gpu_sets") or [],
                                      "gpu_kind": about.get("gpu_kind")}
        elif gpus:
            gpu_suites[f"{job.rule.name}-{gpus}"] = {"gpus": gpus}
        if job.rule.name == "image_build" or (
                job.rule.name == "run_benchmark" and spec_settings(job.wildcards)["runtime"] == "container"):
            engine = True
        if job.rule.name == "model_identity":
            params = model_rule_params(config, wc["model"])
            if params["source"] == "hub" and not snapshot_dir(
                    params["hf_home"], params["repo_id"], params["revision"]).is_dir():
                downloads[wc["model"]] = params
    return list(gpu_suites.values()), engine, list(downloads.values())


def check_readiness():
    """Stop, before the first job, with one block naming everything this machine lacks for the DAG."""
    import sys

    from rl_pipeline_bench.runs.readiness import not_ready, workflow_problems

    gpu_suites, engine, downloads = readiness_needs(workflow.dag.needrun_jobs())
    executor = workflow.executor_plugin.name if workflow.executor_plugin is not None else "local"
    problems = workflow_problems(gpu_suites, engine, downloads, executor)
    if problems:
        print(str(not_ready(f"suite {SUITE.name}", problems)), file=sys.stderr)
        sys.exit(1)


onstart:
    check_readiness()
