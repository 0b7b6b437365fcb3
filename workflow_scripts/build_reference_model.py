"""Snakemake script for rule model_identity, local models: build config -> snapshot -> identity record.

Thin on purpose: building, hashing and reuse live in rl_pipeline_bench.models.reference.
"""

import logging
import sys

from rl_pipeline_bench.models.reference import build_reference_snapshot
from rl_pipeline_bench.models.snapshots import SnapshotError, write_record

smk = snakemake  # noqa: F821  (injected by Snakemake's script directive)
logging.basicConfig(filename=smk.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
log = logging.getLogger("model_identity")
p = smk.params.model  # rl_pipeline_bench.models.snapshots.model_rule_params
model, repo_id = p["model"], p["repo_id"]
log.info("building %s (%s) from %s into HF_HOME %s", model, repo_id, p["build_config"], p["hf_home"])
try:
    record = build_reference_snapshot(p["build_config"], p["hf_home"], model=model, repo_id=repo_id)
except SnapshotError as exc:
    log.error("%s", exc)
    print(f"model_identity: {exc}", file=sys.stderr)
    sys.exit(1)
write_record(record, smk.output[0])
log.info("snapshot %s revision %s (%d files); wrote %s", record["snapshot_path"], record["revision"],
         len(record["files"]), smk.output[0])
