"""Where the engine computes: the torch device, and the CPU threads of the process."""

from __future__ import annotations

import torch


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` is the first CUDA device when there is one, else the CPU."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available")
    return resolved


def set_cpu_threads(threads: int) -> None:
    """Set torch's intra-op CPU threads for the whole process; 0 keeps torch's default.

    A process-wide setting, so only programs (the node, the command line) call it. On a busy
    machine torch's OpenMP threads spin-wait against other threads; one thread made a
    mapping update 8x faster there, and costs little at the matrix sizes of a map.
    """
    if threads < 0:
        raise ValueError(f"threads must be >= 0, got {threads}")
    if threads > 0:
        torch.set_num_threads(threads)
