# Model identity: the pinned snapshot behind every run, as a file target.
#
# results/models/{model}.json is the identity record (rl-bench/model/v1): repo id,
# 40-hex revision, HF_HOME, snapshot path and the sha256 of every snapshot file.
# A `source: local` model (the reference backend's tiny model) is built from its
# build config into the same hub/ layout; a `source: hub` model is resolved at its
# pinned revision through huggingface_hub (offline, HF_HUB_OFFLINE=1: only verified,
# never fetched). Needs only `config`; `--config hf_cache=PATH` reuses an HF_HOME.
# Params given to both scripts: model, source, repo_id, revision, build_config, hf_home.

from rl_pipeline_bench.snapshots import model_rule_params as _model_params


# Runs where Snakemake runs, also under a cluster executor (see the Snakefile).
localrules:
    model_identity,


rule model_identity:
    message:
        "model {wildcards.model}: build or resolve the pinned snapshot and hash it"
    input:
        model_inputs,
    output:
        "results/models/{model}.json",
    log:
        "logs/models/{model}.log",
    params:
        model=lambda wc: wc.model,
        source=lambda wc: _model_params(config, wc.model)["source"],
        repo_id=lambda wc: _model_params(config, wc.model)["repo_id"],
        revision=lambda wc: _model_params(config, wc.model)["revision"],
        build_config=lambda wc: _model_params(config, wc.model)["build_config"],
        hf_home=lambda wc: _model_params(config, wc.model)["hf_home"],
        script=lambda wc: _model_params(config, wc.model)["script"],
    script:
        "../workflow_scripts/{params.script}"
