# Recipe and source identities as file targets.
#
# results/provenance/recipes/{backend}.json: sha256 over the backend's recipe files
# (containers/{backend}/: Dockerfile, setup script, env wrapper, pins; containers/common/;
# its driver package; files its pins name) and their list. {backend} is any registered
# backend (a package under src/rl_pipeline_bench/backends/ of this workflow's tree).
# results/provenance/source.json: sha256 over the benchmark's Python and workflow files.
# Inputs are the hashed files themselves, so any edit, addition or removal re-runs
# the rule. Needs only the repository (the main Snakefile's directory). The module
# is standard-library only, so these jobs start fast.

from pathlib import Path as _ProvPath
import os as _prov_os

from rl_pipeline_bench import provenance as _prov
from rl_pipeline_bench.backends import names as _backend_names

_PROV_ROOT = _ProvPath(workflow.basedir).resolve()
#: Wildcard pattern of the registered backends (one alternative per backend package).
BACKEND_PATTERN = "|".join(_backend_names(_PROV_ROOT))


# Runs where Snakemake runs, also under a cluster executor (see the Snakefile).
localrules:
    recipe_hash,
    source_hash,


rule recipe_hash:
    message:
        "hash the {wildcards.backend} recipe"
    input:
        lambda wc: [_prov_os.path.relpath(_PROV_ROOT / f) for f in _prov.recipe_files(wc.backend, _PROV_ROOT)],
    output:
        "results/provenance/recipes/{backend}.json",
    log:
        "logs/provenance/recipe_{backend}.log",
    wildcard_constraints:
        backend=BACKEND_PATTERN,
    params:
        root=str(_PROV_ROOT),
    shell:
        "python -m rl_pipeline_bench.provenance recipe --backend {wildcards.backend} --root {params.root:q} --output {output:q} > {log:q} 2>&1"


rule source_hash:
    message:
        "hash the benchmark source"
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
