"""Attention on arrays through cpdit's dispatcher, as diffusers' ``dispatch_attention_fn``."""

from typing import Any, List, Optional

from . import _cpdit
from ._arrays import engine_array, like_input

__all__ = ["backends", "dispatch"]


def backends() -> List[str]:
    """The names of the registered attention backends (``native``, ``flash``)."""
    return _cpdit.attention_backends()


def dispatch(
    q: Any,
    k: Any,
    v: Any,
    mask: Optional[Any] = None,
    backend: Optional[str] = None,
    scale: Optional[float] = None,
    return_lse: bool = False,
) -> Any:
    """Scaled dot-product attention on the chosen backend.

    Layouts as diffusers' dispatcher: ``q`` (B, S_q, H, D), ``k`` and ``v`` (B, S_k, H_kv, D) with H a
    multiple of H_kv (grouped-query attention). ``mask``: bool (B, S_k) key padding, bool
    (B|1, H|1, S_q, S_k), or float32 additive of that shape (True / 0 = attend). ``backend``: a name of
    :func:`backends` (default: the process default, ``flash`` unless $CPDIT_ATTENTION_BACKEND says
    otherwise). ``scale``: default 1/sqrt(D); one given must be positive and finite (ValueError otherwise).

    numpy float32 C-contiguous inputs are read in place, torch CPU tensors through DLPack; others are
    copied once. Returns ``out`` (B, S_q, H, D) float32, and with ``return_lse`` also the log-sum-exp
    (B, H, S_q) float32 (natural log; -inf for a row that sees no key). Outputs are numpy arrays, or
    torch tensors when ``q`` is one.
    """
    arrays = [engine_array(x, name) for x, name in ((q, "q"), (k, "k"), (v, "v"))]
    if mask is not None:
        import numpy as np

        m = engine_array(mask, "mask", np.bool_ if _is_bool(mask) else np.float32)
    else:
        m = None
    out, lse = _cpdit.attention_dispatch(*arrays, m, backend or "", None if scale is None else float(scale))
    out, lse = like_input(out, q), like_input(lse, q)
    return (out, lse) if return_lse else out


def _is_bool(mask):
    dtype = getattr(mask, "dtype", None)
    return dtype is not None and str(dtype) in ("bool", "torch.bool")
