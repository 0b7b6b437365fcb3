# Backend images as file targets: results/images/{backend}.json records the image id,
# labels (baked recipe and source sha256), base image, engine and build time.
#
# Builds go to whatever Docker-API engine DOCKER_HOST names and are never pushed.
# RL_BENCH_BASE_IMAGE overrides the pinned base image (recorded in the record).
# The image record is not proof at run time: the run calls the preflight
# (`bench preflight` / rl_pipeline_bench.provenance.images.preflight) before any GPU lease.

# Runs where Snakemake runs, also under a cluster executor (see the Snakefile).
localrules:
    image_build,


rule image_build:
    message:
        "build the {wildcards.backend} image"
    input:
        recipe=paths.RECIPE_RECORD,
        source=paths.SOURCE_RECORD,
    output:
        paths.IMAGE_RECORD,
    log:
        "logs/images/{backend}.log",
    wildcard_constraints:
        backend=BACKEND_PATTERN,
    params:
        root=str(Path(workflow.basedir).resolve()),
    shell:
        "bench build --backend {wildcards.backend} --root {params.root:q} --output {output:q} --log {log:q}"
