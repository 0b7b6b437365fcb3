# Recipe and source identities as file targets.
#
# results/provenance/recipes/{backend}.json: sha256 over the backend's recipe files
# (Dockerfile, envs/ pins, setup script, env wrapper, driver code) and their list.
# results/provenance/source.json: sha256 over the benchmark's Python and workflow files.
# Inputs are the hashed files themselves, so any edit, addition or removal re-runs
# the rule. Needs only the repository (the main Snakefile's directory). The module
# is standard-library only, so these jobs start fast.

from pathlib import Path as _ProvPath
import os as _prov_os

from rl_pipeline_bench import provenance as _prov

_PROV_ROOT = _ProvPath(workflow.basedir).resolve()


rule recipe_hash:
    input:
        lambda wc: [_prov_os.path.relpath(_PROV_ROOT / f) for f in _prov.recipe_files(wc.backend, _PROV_ROOT)],
    output:
        "results/provenance/recipes/{backend}.json",
    log:
        "logs/provenance/recipe_{backend}.log",
    wildcard_constraints:
        backend="reference|art|skyrl",
    params:
        root=str(_PROV_ROOT),
    shell:
        "python -m rl_pipeline_bench.provenance recipe --backend {wildcards.backend} --root {params.root:q} --output {output:q} > {log:q} 2>&1"


rule source_hash:
    input:
        [_prov_os.path.relpath(_PROV_ROOT / f) for f in _prov.source_files(_PROV_ROOT)],
    output:
        "results/provenance/source.json",
    log:
        "logs/provenance/source.log",
    params:
        root=str(_PROV_ROOT),
    shell:
        "python -m rl_pipeline_bench.provenance source --root {params.root:q} --output {output:q} > {log:q} 2>&1"
