# Model identity: the pinned snapshot behind every run, as a file target.
#
# results/models/{model}.json is the identity record (rl-bench/model/v1): repo id,
# 40-hex revision, HF_HOME, snapshot path and the sha256 of every snapshot file.
# A `source: local` model (the reference backend's tiny model) is built from its
# build config into the same hub/ layout; a `source: hub` model is resolved at its
# pinned revision through huggingface_hub (offline: only verified, never fetched).
# Needs only `config`; `--config hf_cache=PATH` reuses an existing HF_HOME.


def _model_settings(model):
    models = config["models"]
    if model not in models:
        raise ValueError(f"unknown model '{model}' (known models: {', '.join(sorted(models))})")
    return models[model]


def _model_hf_home(model):
    return config.get("hf_cache") or "results/models/hf_home"


def _model_inputs(wildcards):
    m = _model_settings(wildcards.model)
    if m["source"] == "local":
        return [m["build_config"], "src/rl_pipeline_bench/reference_model.py"]
    return []


rule model_identity:
    input:
        _model_inputs,
    output:
        "results/models/{model}.json",
    log:
        "logs/models/{model}.log",
    params:
        model=lambda wc: wc.model,
        source=lambda wc: _model_settings(wc.model)["source"],
        repo_id=lambda wc: _model_settings(wc.model)["repo_id"],
        revision=lambda wc: _model_settings(wc.model).get("revision"),
        build_config=lambda wc: _model_settings(wc.model).get("build_config"),
        hf_home=lambda wc: _model_hf_home(wc.model),
        script=lambda wc: "build_reference_model.py" if _model_settings(wc.model)["source"] == "local" else "resolve_hub_model.py",
    script:
        "../workflow_scripts/{params.script}"
