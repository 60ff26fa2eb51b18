"""Type stubs of cpdit's native module (python/src/). Use it through the cpdit package."""

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

__version__: str

def attention_dispatch(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: Optional[np.ndarray] = None, backend: str = "", scale: Optional[float] = None
) -> Tuple[np.ndarray, np.ndarray]: ...
def attention_backends() -> List[str]: ...
def check_attention_backend(name: str) -> None: ...
def borrowed_address(array: np.ndarray) -> int: ...
def check_parallel_config(ring_degree: int, ulysses_degree: int, cfg_degree: int, rotate_method: str) -> None: ...
def launched_by_mpi() -> bool: ...
def models_opened() -> int: ...

class RankRequest:
    """--ring, --ulysses, --cfg-parallel, --rotate, --backend, --ranks and --threads (0 / "": not given)."""

    ring: int
    ulysses: int
    cfg: int
    rotate: str
    backend: str
    ranks: int
    threads: int

class PipelineSource:
    """What a pipeline opens: a model path or a preset, and the weights' dtype in memory; a transformer
    config.json overriding the checkpoint's, and a transformer weights file run instead of a pipeline
    folder's transformer/."""

    model: str
    preset: str
    config: str
    transformer: str
    dtype: str

def read_lora(path: str) -> Dict[str, Any]:
    """A LoRA file read and checked as a run reads it: its layout and module count."""

class Request:
    """One generation's options; a field left alone keeps the pipeline's default."""

    prompt: Optional[str]
    negative_prompt: Optional[str]
    random_embeddings: bool
    steps: int
    height: int
    width: int
    frames: int
    text_tokens: int
    ar_step: int
    first_image: str
    last_image: str
    init_image: str
    strength: Optional[float]
    fps: Optional[int]
    base_num_frames: int
    overlap_history: Optional[int]
    addnoise_condition: float
    decode_timestep: float
    decode_noise_scale: Optional[float]
    seed: int
    guidance: float
    guidance_2: float
    true_cfg_scale: float
    scheduler: str
    flow_shift: Optional[float]
    sigmas: List[float]
    decode: bool
    loras: List[Tuple[str, float, bool, bool]]
    cache: str
    parallel: RankRequest

class LoadPolicy:
    """resident (every model kept), staged (each stage loads and frees its own), automatic."""

    automatic: "LoadPolicy"
    resident: "LoadPolicy"
    staged: "LoadPolicy"
    name: str
    value: int

class Pipeline:
    """A pipeline opened once, run for any number of requests."""

    family: str
    resident: bool
    has_vae: bool
    @staticmethod
    def open(source: PipelineSource, policy: LoadPolicy = ...) -> "Pipeline": ...
    def run(
        self,
        request: Request,
        embeddings: Dict[str, np.ndarray] = ...,
        latents: Optional[np.ndarray] = None,
        sigint_stops: bool = True,
        on_step: Optional[Callable[[int, int], None]] = None,
        on_step_latents: Optional[Callable[[int, float, np.ndarray], Any]] = None,
    ) -> Optional[Dict[str, Any]]: ...
    def decode_vae(self, z: np.ndarray, ranks: int = 1) -> np.ndarray: ...
    def vae_config(self) -> str: ...
