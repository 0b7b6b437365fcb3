"""Which rules a cluster executor submits: exactly those with a `gpu` or `bench_slot` resource.

A rule missing from every `localrules:` would be sent to SLURM or Kubernetes as a job of
its own (the paper rules once were); a GPU rule listed there would run on the submit host.
"""

from __future__ import annotations

from pathlib import Path

from snakemake.api import SnakemakeApi
from snakemake.settings.types import OutputSettings, Quietness, ResourceSettings

ROOT = Path(__file__).resolve().parents[1]
#: Resources that send a rule to the cluster: it needs GPUs, or it measures the node it runs on.
CLUSTER_RESOURCES = {"gpu", "bench_slot"}


def test_exactly_the_rules_without_cluster_resources_are_local():
    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        workflow_api = api.workflow(resource_settings=ResourceSettings(), snakefile=ROOT / "Snakefile", workdir=ROOT)
        # Snakemake internals (9.x): the parsed Workflow and the set its `localrules:` directives fill.
        workflow = workflow_api._workflow
        local = set(workflow._localrules)
        rules = {rule.name: set(rule.resources) for rule in workflow.rules}
    assert local <= set(rules), f"localrules name unknown rules: {sorted(local - set(rules))}"
    cluster = {name for name, resources in rules.items() if resources & CLUSTER_RESOURCES}
    assert sorted(set(rules) - cluster - local) == [], "light rules missing from localrules"
    assert sorted(cluster & local) == [], "rules with a gpu or bench_slot resource listed as local"
    assert {"run_benchmark", "eval_run", "allreduce_probe", "storage_probe", "checkpoint_probe"} <= cluster
