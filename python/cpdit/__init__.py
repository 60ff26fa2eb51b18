"""cpdit: diffusion transformers with context parallelism, in the shapes of Hugging Face diffusers.

The C++ engine runs underneath (the same code as the ``cpdit`` command line)::

    import cpdit

    pipe = cpdit.FluxPipeline.from_pretrained("FLUX.1-dev")
    pipe.transformer.enable_parallelism(cpdit.ContextParallelConfig(ring_degree=2, ulysses_degree=2))
    pipe.transformer.set_attention_backend("flash")
    pipe.transformer.enable_cache(cpdit.FirstBlockCacheConfig(threshold=0.08))  # optional: a step cache
    image = pipe("a red fox in the snow", num_inference_steps=28).images[0]

Ranks are threads of this process by default (``ranks=`` on the call, else ring x Ulysses of the
enabled config, else one); under ``mpirun -np N python script.py`` they are the MPI processes, and rank
0 gets the result while the others get None. Bad arguments raise ValueError, failures RuntimeError, both
with the engine's one-line message; Ctrl-C stops a generation at the next denoising step
(KeyboardInterrupt).
"""

from . import attention
from ._cache import FirstBlockCacheConfig, MagCacheConfig, TaylorSeerCacheConfig
from ._parallel import ContextParallelConfig, Transformer
from ._pipelines import (
    FluxImg2ImgPipeline,
    FluxPipeline,
    ImagePipelineOutput,
    LTXPipeline,
    QwenImageImg2ImgPipeline,
    QwenImagePipeline,
    SkyReelsV2DiffusionForcingPipeline,
    SkyReelsV2ImageToVideoPipeline,
    VideoPipelineOutput,
    WanImageToVideoPipeline,
    WanPipeline,
)
from .schedulers import DPMSolverMultistepScheduler, FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler
from ._cpdit import __version__

__all__ = [
    "ContextParallelConfig",
    "DPMSolverMultistepScheduler",
    "FirstBlockCacheConfig",
    "FlowMatchEulerDiscreteScheduler",
    "FluxImg2ImgPipeline",
    "FluxPipeline",
    "ImagePipelineOutput",
    "LTXPipeline",
    "MagCacheConfig",
    "QwenImageImg2ImgPipeline",
    "QwenImagePipeline",
    "SkyReelsV2DiffusionForcingPipeline",
    "SkyReelsV2ImageToVideoPipeline",
    "TaylorSeerCacheConfig",
    "Transformer",
    "UniPCMultistepScheduler",
    "VideoPipelineOutput",
    "WanImageToVideoPipeline",
    "WanPipeline",
    "attention",
    "__version__",
]
