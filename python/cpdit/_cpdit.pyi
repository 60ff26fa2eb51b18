"""Type stubs of cpdit's native module (python/src/). Use it through the cpdit package."""

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

__version__: str

def attention_dispatch(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: Optional[np.ndarray] = None, backend: str = "", scale: float = 0.0
) -> Tuple[np.ndarray, np.ndarray]: ...
def attention_backends() -> List[str]: ...
def check_attention_backend(name: str) -> None: ...
def borrowed_address(array: np.ndarray) -> int: ...
def check_parallel_config(ring_degree: int, ulysses_degree: int, cfg_degree: int, rotate_method: str) -> None: ...
def launched_by_mpi() -> bool: ...
def generate(
    *,
    model: str = "",
    preset: str = "",
    prompt: Optional[str] = None,
    negative_prompt: Optional[str] = None,
    height: int = 0,
    width: int = 0,
    frames: int = 0,
    steps: int = 0,
    guidance: float = ...,
    true_cfg_scale: float = ...,
    seed: int = 0,
    text_tokens: int = 0,
    ar_step: int = 0,
    fps: Optional[int] = None,
    embeddings: Dict[str, np.ndarray] = ...,
    latents: Optional[np.ndarray] = None,
    decode: bool = False,
    ring: int = 0,
    ulysses: int = 0,
    cfg: int = 1,
    rotate: str = "p2p",
    backend: str = "",
    ranks: int = 0,
    threads: int = 0,
    dtype: str = "auto",
    sigint_stops: bool = True,
) -> Optional[Dict[str, Any]]: ...
