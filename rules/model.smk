# Model identity: the pinned snapshot behind every run, as a file target.
#
# results/models/{model}.json is the identity record (rl-bench/model/v1): repo id,
# 40-hex revision, HF_HOME, snapshot path and the sha256 of every snapshot file.
# A `source: local` model (the reference backend's tiny model) is built from its
# build config into the same hub/ layout; a `source: hub` model is resolved at its
# pinned revision through huggingface_hub (offline, HF_HUB_OFFLINE=1: only verified,
# never fetched). Needs only `config`; `--config hf_cache=PATH` reuses an HF_HOME.
# Both scripts get one param, `model`: {model, source, repo_id, revision, build_config, hf_home, script}.

# Runs where Snakemake runs, also under a cluster executor (see the Snakefile).
localrules:
    model_identity,


rule model_identity:
    message:
        "model {wildcards.model}: build or resolve the pinned snapshot and hash it"
    input:
        model_inputs,
    output:
        paths.MODEL_RECORD,
    log:
        "logs/models/{model}.log",
    params:
        # One call: every field rule model_identity needs (rl_pipeline_bench.models.snapshots.model_rule_params).
        model=lambda wc: model_rule_params(config, wc.model),
    script:
        "../workflow_scripts/{params.model[script]}"
