# The resolved run spec of a suite as a file target: results/specs/{suite}-{hash}.json.
#
# Snakemake has merged config.yaml, --configfile and --config; common.smk resolved each
# suite into a spec document whose hash names the file. `bench spec write` re-checks the
# hash and writes it atomically. Every later job (plans, preflight, runs, summaries,
# report) reads this file and never config.yaml. Format: docs/run-spec.md.

import json as _spec_json


# Runs where Snakemake runs, also under a cluster executor (see the Snakefile).
localrules:
    run_spec,


rule run_spec:
    message:
        "write the run spec {wildcards.spec}"
    output:
        "results/specs/{spec}.json",
    log:
        "logs/specs/{spec}.log",
    params:
        doc=lambda wc: _spec_json.dumps(spec_doc(wc.spec), sort_keys=True, separators=(",", ":")),
    shell:
        "bench spec write --doc {params.doc:q} --output {output:q} > {log:q} 2>&1"
