"""Infrastructure probes (seed 002): GPU telemetry beside runs, trainer MFU, all-reduce, storage, checkpoints.

One module per job, none imported here (rank processes and light CLI commands import
only what they need):
  reference_data  targets, GPU peaks and all-reduce expectations, kept as data in data/*.yaml
  telemetry       the NVML sampler beside a leased GPU run (telemetry.parquet)
  phases          samples -> update / rollout / other phases -> per-phase statistics, targets
  flops           the model's matmul inventory (FLOPs card) and FLOPs per trained sequence
  efficiency      a run's achieved trainer FLOP/s and MFU
  run_infra       one run's infrastructure summary (telemetry + efficiency)
  allreduce       torch.distributed all-reduce sweep, algbw / busbw as nccl-tests define them
  fio / direct_io / storage   sequential write/read throughput (fio JSON, else O_DIRECT in Python)
  checkpoint      safetensors save/load time of the model and a LoRA adapter
  gemm            dense GEMM throughput (the measured peak of the MFU table)
"""
