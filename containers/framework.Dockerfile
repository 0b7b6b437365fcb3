# Image of a framework backend (ART, SkyRL): one Dockerfile for all of them, selected by
# the build argument RL_BENCH_BACKEND. A framework's recipe names this file in its
# pins.env (RL_BENCH_DOCKERFILE) instead of carrying its own copy; its own recipe bytes
# (pins.env, setup.sh, env.sh, driver package) are hashed into its recipe as before, and
# this file is hashed into the recipe of each backend that names it (and no other).
# Build it with `bench build --backend NAME` (or the Snakemake target
# results/images/NAME.json): rl_pipeline_bench.provenance.images sends exactly the hashed recipe +
# source files as the context and passes BASE_IMAGE (a CUDA devel image, from the pins),
# RL_BENCH_BACKEND and the controller's recipe/source sha256 as build args. The
# environment is provisioned by the same containers/NAME/setup.sh a native prefix uses,
# in two layers (framework env, then this benchmark); the pinned commit is the
# framework's own pins.env entry. The build fails unless the files it received hash to
# the given values. Images are never pushed.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG RL_BENCH_BACKEND
# The build host's extra CAs (containers/common/with_build_ca.sh); empty on most hosts.
ARG RL_BENCH_BUILD_CA=
ENV DEBIAN_FRONTEND=noninteractive
RUN test -n "$RL_BENCH_BACKEND" || { echo "build arg RL_BENCH_BACKEND (the backend) is required" >&2; exit 1; }
RUN apt-get update && apt-get install -y --no-install-recommends \
        git ca-certificates build-essential python3 python3-pip && \
    rm -rf /var/lib/apt/lists/*
WORKDIR /opt/rl-bench
ENV RL_BENCH_ROOT=/opt/rl-bench RL_BENCH_RUNTIME=container RL_BENCH_BACKEND=${RL_BENCH_BACKEND} \
    RL_BENCH_SETUP_MANIFEST_DIR=/opt/env/setup_manifests \
    CUDA_HOME=/usr/local/cuda PATH=/opt/env/${RL_BENCH_BACKEND}/.venv/bin:$PATH
COPY containers/ containers/
RUN --mount=type=cache,target=/root/.cache/uv \
    set -eu; . "containers/$RL_BENCH_BACKEND/pins.env"; \
    bash containers/common/with_build_ca.sh python3 -m pip install --no-cache-dir "uv==$RL_BENCH_UV_VERSION"; \
    RL_BENCH_ENV_ROOT=/opt/env RL_BENCH_SETUP_PHASE=env bash containers/common/with_build_ca.sh bash "containers/$RL_BENCH_BACKEND/setup.sh"
COPY . .
# Declared here, not above: a new source hash must not invalidate the framework layers.
ARG RL_BENCH_RECIPE_SHA256=
ARG RL_BENCH_SOURCE_SHA256=
RUN --mount=type=cache,target=/root/.cache/uv \
    set -eu; RL_BENCH_ENV_ROOT=/opt/env RL_BENCH_SETUP_PHASE=bench bash containers/common/with_build_ca.sh bash "containers/$RL_BENCH_BACKEND/setup.sh"; \
    "/opt/env/$RL_BENCH_BACKEND/.venv/bin/python" -m rl_pipeline_bench.provenance check --root /opt/rl-bench \
        --backend "$RL_BENCH_BACKEND" --recipe-sha256 "$RL_BENCH_RECIPE_SHA256" --source-sha256 "$RL_BENCH_SOURCE_SHA256"
# The baked hashes, also as environment: the in-image recomputation compares with them
# where no host passes them in (a Kubernetes pod running this image).
ENV RL_BENCH_IMAGE_RECIPE_SHA256=${RL_BENCH_RECIPE_SHA256} RL_BENCH_IMAGE_SOURCE_SHA256=${RL_BENCH_SOURCE_SHA256}
LABEL org.opencontainers.image.title="rl-bench-${RL_BENCH_BACKEND}" \
      rl-bench.backend="${RL_BENCH_BACKEND}" \
      rl-bench.recipe-sha256="${RL_BENCH_RECIPE_SHA256}" \
      rl-bench.source-sha256="${RL_BENCH_SOURCE_SHA256}" \
      rl-bench.dependencies="1"
CMD ["python", "-m", "rl_pipeline_bench.provenance", "show"]
