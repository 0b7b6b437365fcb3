"""Kubernetes qualification flow of the seed: one pod, one backend, all suite workloads.

`scripts/qualify_kubernetes.py` (thin) calls `cli.main`. The controller creates one
pod from an image pinned by digest, verifies the pod UID and the container's actual
imageID before it releases the benchmark and again after completion, has the pod
check its baked recipe/source hashes against the mounted source record, collects
the artifacts through the API (no shared filesystem) and never deletes the pod or
reruns anything. Modules:
  request     - the validated request (flags, image reference, source record, output)
  manifests   - the pod and ConfigMap manifests (plain dicts, API field names)
  markers     - the log lines the pod and the controller exchange
  pod         - what runs inside the pod (`python -m rl_pipeline_bench.k8s.pod`)
  collect     - artifact archive written in the pod, unpacked by the controller
  api         - the small edge to the `kubernetes` client
  controller  - the state machine, its persistent record, --resume
"""
