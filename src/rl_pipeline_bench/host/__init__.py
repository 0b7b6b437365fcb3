"""Facts of the machine a run is on: its GPUs (NVML), host description, SLURM job, and whether a recorded process is alive."""
