"""A decode-time MoE experts implementation: every expert on every token, no per-token weight gather.

At decode a batch holds a few dozen tokens. transformers' `batched_mm` gathers each
token's k experts' weights (for 32 rows x top 4 of the reference GPU model that is 128
weight copies per layer and step); `grouped_mm` sorts tokens by expert with
data-dependent offsets. Running all E experts on the T tokens reads each expert's
weights once, in E batched matmuls of fixed shape, and weights the outputs by the
routing (zero off the top k): E/k times the arithmetic, which at decode is cheap, and
no data-dependent shape, so the step captures in a CUDA graph. For prefill (thousands of
tokens) the arithmetic and the [E, T, 2I] activations grow with T, so the decoder uses
it only inside the decode step.

Registered with transformers' experts interface as `DENSE` (where that interface
exists); `register()` says whether it could be.
"""

from __future__ import annotations

import torch

DENSE = "rl_bench_dense"


def dense_experts_forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                          top_k_weights: torch.Tensor) -> torch.Tensor:
    """[T, H] output of every expert on every token, weighted by the routing (transformers' experts signature)."""
    if getattr(self, "has_post_expert_norm", False):
        raise NotImplementedError("dense experts: post-expert norm is not supported")
    transposed = bool(getattr(self, "is_transposed", False))
    gated = bool(getattr(self, "has_gate", True))
    x = hidden_states.unsqueeze(0)  # [1, T, H], broadcast over the experts
    up = self.gate_up_proj if gated else self.up_proj
    h = torch.matmul(x, up if transposed else up.transpose(1, 2))  # [E, T, 2I] (or [E, T, I])
    if getattr(self, "has_bias", False):
        h = h + (self.gate_up_proj_bias if gated else self.up_proj_bias)[:, None, :]
    h = self._apply_gate(h) if gated else self.act_fn(h)
    y = torch.matmul(h, self.down_proj if transposed else self.down_proj.transpose(1, 2))  # [E, T, H]
    if getattr(self, "has_bias", False):
        y = y + self.down_proj_bias[:, None, :]
    routing = torch.zeros((hidden_states.shape[0], y.shape[0]), dtype=y.dtype, device=y.device)
    routing.scatter_(1, top_k_index, top_k_weights.to(y.dtype))  # [T, E], zero off the top k
    return torch.einsum("eth,te->th", y, routing).to(hidden_states.dtype)


def register() -> bool:
    """Make `DENSE` a valid `experts_implementation`; False where this transformers has no experts interface."""
    try:
        from transformers.integrations.moe import ExpertsInterface
    except ImportError:
        return False
    ExpertsInterface.register(DENSE, dense_experts_forward)
    return True
