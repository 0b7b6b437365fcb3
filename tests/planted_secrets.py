"""A broad planted set of secrets (tests/test_redaction.py, tests/test_pipeline.py).

Every planted secret carries the marker "Pl4nted" in its secret part only (host names,
user names and key names around it do not), so "no 'Pl4nted' anywhere" is the check.
"""

MARK = "Pl4nted"

#: Credentials under names a name list misses, and under innocent names.
PLANTED_ENV = {
    "PGPASSWORD": "pg-Pl4nted-Pass-0001",
    "MYSQL_PWD": "my-Pl4nted-Pass-0002",
    "DB_PASS": "db-Pl4nted-Pass-0003",
    "GITHUB_PAT": "ghp_Pl4ntedPersonalAccessToken00000004",
    "CI_PUSH": "glpat-Pl4ntedGitLabToken000005",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0000/B0000/Pl4ntedSlackHook0006",
    "NOTIFY": "https://acme.webhook.office.com/webhookb2/Pl4ntedTeamsHook0007",
    "SENTRY_DSN": "https://Pl4ntedSentryKey0008@o12345.ingest.sentry.io/678",
    "AZURE_STORAGE_CONNECTION_STRING": (
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Pl4ntedAccountKey0009+/==;EndpointSuffix=core.windows.net"),
    "CACHE_URL": "redis://:Pl4ntedRedisPass0010@cache.internal:6379/0",
    "EXTRA_HTTP_HEADERS": "Authorization: Bearer Pl4ntedBearerToken0011",
    "DATABASE_URL": "postgresql://app:Pl4ntedDbUrlPass0012@db.internal:5432/app",
    "OPENAI_KEY": "sk-Pl4ntedOpenAiStyleKey00000013",
    "SESSION_COOKIE": "Pl4ntedCookie0014",
    "UNRELATED_SETTING": "Pl4ntedInnocentLooking0015",  # no secret name, no secret shape: only the allow-list stops it
    # allow-listed prefixes that still hold credentials: a secret name, or a name not known to shape a run
    "HF_TOKEN": "hf_Pl4ntedHuggingFaceToken00016",
    "HF_MIRROR_URL": "https://mirror:Pl4ntedMirrorPass0017@hf-mirror.internal",  # HF_ prefix, read by no library
    "RL_BENCH_TRACKING_URI": "https://tracker.internal/api?project=x&access_token=Pl4ntedQueryToken0018",
    # allowed prefixes, innocent names, no secret shape: only "not a known run-shaping variable" stops them
    "RL_BENCH_DB_LOGIN": "Pl4ntedUnderAllowedPrefix0041",
    "SLURM_JOB_COMMENT": "deploy with Pl4ntedFreeText0042 please",
    "NCCL_IB_HCA": "mlx5_0",
    # run-shaping values that must survive
    "CUDA_VISIBLE_DEVICES": "GPU-0000",
    "OMP_NUM_THREADS": "2",
    "TORCH_HOME": "/cache/torch",
    "HF_HOME": "/cache/hf",
    "HOME": "/home/someone",
    "PATH": "/usr/bin",
}

#: Values that neither their names nor their shapes give away: only what is recorded keeps them out.
SHAPELESS = frozenset({"UNRELATED_SETTING", "RL_BENCH_DB_LOGIN", "SLURM_JOB_COMMENT"})

#: Only the secrets, for planting into a real run's environment (no PATH/HOME overrides).
PLANTED_SECRETS = {k: v for k, v in PLANTED_ENV.items() if MARK in v}
