"""One result whatever the hardware: torch set up the same way in every process that runs a
checkpoint, and what it ran on written beside the result.

On a GPU, convolutions and matrix products use TF32 (10-bit mantissa) by default in cuDNN, and
may pick non-deterministic kernels: measured on an H100, the same checkpoint and seeds took 11
different actions in 4,098 on `cuda` and `cpu` (max logit difference 4.3e-6); with TF32 off, none.
So every reduced-precision path is off and only deterministic algorithms may run: an operation
that has none raises, and the unit is the agent's error rather than a result that depends on the
device (docs/mario.md, "Same result on any device").
"""

from __future__ import annotations

import os
from typing import Any

# cuBLAS needs a fixed workspace to be deterministic; read when its first handle is made, so it
# is set before anything touches CUDA (torch.use_deterministic_algorithms raises otherwise).
CUBLAS_WORKSPACE = ":4096:8"


def make_deterministic(torch: Any) -> None:
    """Full float32 precision and deterministic kernels, for this whole process. Called again
    after a checkpoint is loaded: its unpickling runs code that could have turned them back."""
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.benchmark = False  # autotuning picks kernels by timing: by chance
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True)


def determinism_flags(torch: Any) -> dict[str, Any]:
    """The flags as torch holds them now (read back, not what was asked for)."""
    matmul = torch.backends.cuda.matmul
    return {
        "tf32_matmul": bool(matmul.allow_tf32),
        "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
        "reduced_precision_reduction": bool(
            matmul.allow_fp16_reduced_precision_reduction
            or matmul.allow_bf16_reduced_precision_reduction
        ),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
    }


def runtime_provenance(torch: Any, device: Any) -> dict[str, Any]:
    """Where a checkpoint ran: the device (and GPU name), torch, CUDA and cuDNN versions, and
    the determinism flags. Stored with every unit result of a checkpoint agent."""
    where = str(device)
    gpu = None
    if where.startswith("cuda"):
        gpu = torch.cuda.get_device_name(torch.device(where))
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "device": where,
        "gpu": gpu,
        "torch": str(torch.__version__),
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        **determinism_flags(torch),
    }
