# Every Python name the rules use, imported once, here. rules/common.smk includes this
# file first; a test that runs one rules/*.smk on its own includes it before that file.
# Imports that only some jobs need stay inside the functions of common.smk (lazy).

import json
import os
import shlex
from pathlib import Path

from rl_pipeline_bench import paths, provenance
from rl_pipeline_bench.backends import names as backend_names
from rl_pipeline_bench.config import validate_config
from rl_pipeline_bench.configfile import ConfigError, get_suite, safe_name_regex
from rl_pipeline_bench.eval import targets as eval_targets
from rl_pipeline_bench.evidence_digest import edited_evidence
from rl_pipeline_bench.settings_hash import HASH_LENGTH
from rl_pipeline_bench.progress import PREFIX as progress_prefix
from rl_pipeline_bench.snapshots import model_rule_params
from rl_pipeline_bench.spec import SPEC_ID_PATTERN, RunSpec, SpecError, build_spec, load_spec
