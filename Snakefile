# RL Systems Bench workflow entry point.
# Validates the config, includes one rules/*.smk per stage and names the targets.
# Newcomer: `uv run snakemake --cores 1 reports/comparison.html` (README.md).

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config.yaml"


validate(config, "schemas/config.schema.yaml")


include: "rules/common.smk"
include: "rules/provenance.smk"
include: "rules/containers.smk"
include: "rules/model.smk"
include: "rules/workloads.smk"
include: "rules/runs.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        rules.render_report.output.html,
