"""Pipelines with diffusers' call signature, run by the engine's generate job.

Each pipeline is a diffusers pipeline folder (``save_pretrained``'s layout: model_index.json,
transformer/, scheduler/, vae/, and the tokenizers and text encoders when it has them) or a built-in
preset with seeded random weights. A call runs the same stages as ``cpdit generate``: encode the prompt
(or take ``prompt_embeds``), denoise, decode.
"""

import dataclasses
import json
import math
import os
import threading
from typing import Any, Optional

import numpy as np

from . import _cpdit
from ._arrays import engine_array
from ._parallel import Transformer

__all__ = [
    "FluxPipeline",
    "ImagePipelineOutput",
    "QwenImagePipeline",
    "SkyReelsV2DiffusionForcingPipeline",
    "VideoPipelineOutput",
    "WanPipeline",
]


@dataclasses.dataclass
class ImagePipelineOutput:
    """``images``: PIL images, a (B, H, W, 3) float32 array in [0, 1] ("np"), or latents ("latent")."""

    images: Any


@dataclasses.dataclass
class VideoPipelineOutput:
    """``frames``: (B, F, H, W, 3) float32 in [0, 1] ("np"), a list of lists of PIL images ("pil"), or
    latents ("latent")."""

    frames: Any


# The embeddings a call may pass, by the names diffusers' pipelines give them (and cpdit's
# --embeddings file uses).
_EMBEDDING_NAMES = (
    "prompt_embeds",
    "pooled_prompt_embeds",
    "prompt_embeds_mask",
    "negative_prompt_embeds",
    "negative_pooled_prompt_embeds",
    "negative_prompt_embeds_mask",
)


# The diffusers arguments that have no value of their own (None): the engine's default is 0 or NaN.
_UNSET = dict(height=0, width=0, num_frames=0, num_inference_steps=0, guidance_scale=math.nan,
              true_cfg_scale=math.nan, threads=0)


class _Pipeline:
    # Set by each family: the model_index.json _class_name values it runs, its presets' prefix, and
    # its output class.
    _pipeline_classes: tuple = ()
    _preset_prefix = ""
    _output: Any = None
    _family_options: tuple = ()  # keywords only this family takes (SkyReels-V2's ar_step, fps)

    def __init__(self, model="", preset=""):
        self.model = model
        self.preset = preset
        self.transformer = Transformer()

    @classmethod
    def from_pretrained(cls, path, **unused):
        """A diffusers pipeline folder (or a transformer folder or checkpoint file, without text encoders
        or VAE). Nothing is loaded until the pipeline is called: each stage loads its model when it
        starts and frees it when it ends."""
        path = os.fspath(path)
        if not os.path.exists(path):
            raise ValueError(f"{cls.__name__}.from_pretrained: {path} does not exist")
        index = os.path.join(path, "model_index.json")
        if os.path.isfile(index):
            with open(index, encoding="utf-8") as f:
                name = json.load(f).get("_class_name")
            if name not in cls._pipeline_classes:
                wanted = " or ".join(cls._pipeline_classes)
                raise ValueError(f"{path} holds a {name}, not a {wanted}; use the cpdit pipeline of its class")
        return cls(model=path)

    @classmethod
    def from_preset(cls, name):
        """A built-in pipeline with seeded random weights (``cpdit generate --preset``), e.g. "flux-tiny"."""
        if not name.startswith(cls._preset_prefix):
            raise ValueError(f"{cls.__name__} runs the {cls._preset_prefix}* presets, not {name!r}")
        return cls(preset=name)

    def _run(self, call):
        """One generation for the arguments of a __call__ (diffusers' names, as locals() gives them)."""
        output_type, prompt = call["output_type"], call["prompt"]
        family = call.get("family_options", {})
        unexpected = sorted(set(family) - set(self._family_options))
        if unexpected:
            raise TypeError(f"{type(self).__name__} got unexpected keyword arguments {', '.join(unexpected)}")
        if output_type not in ("pil", "np", "latent"):
            raise ValueError(f"output_type must be 'pil', 'np' or 'latent', got {output_type!r}")
        if prompt is not None and call["prompt_embeds"] is not None:
            raise ValueError("give prompt or prompt_embeds, not both")
        if prompt is not None and not isinstance(prompt, str):
            raise ValueError(f"prompt must be one string (no batches yet), got {type(prompt).__name__}")
        # Prompt masks as diffusers makes them (int64 0/1), embeddings float32; read in place when they are.
        embeddings = {name: engine_array(call[name], name, np.int64 if name.endswith("_mask") else np.float32)
                      for name in _EMBEDDING_NAMES if call.get(name) is not None}
        value = {name: default if call.get(name) is None else call[name] for name, default in _UNSET.items()}
        config = self.transformer.parallel_config
        ranks = call["ranks"]
        # Under mpirun the processes are the ranks; otherwise ranks=, else the config's, else one.
        if ranks is None and not _cpdit.launched_by_mpi():
            ranks = config.world_size if config is not None else 1
        result = _cpdit.generate(
            model=self.model,
            preset=self.preset,
            prompt=prompt,
            negative_prompt=call["negative_prompt"],
            height=value["height"],
            width=value["width"],
            frames=value["num_frames"],
            steps=value["num_inference_steps"],
            guidance=value["guidance_scale"],
            true_cfg_scale=value["true_cfg_scale"],
            seed=call["generator_seed"],
            text_tokens=call["max_sequence_length"] or 0,
            ar_step=family.get("ar_step", 0),
            fps=family.get("fps"),
            embeddings=embeddings,
            latents=None if call["latents"] is None else engine_array(call["latents"], "latents"),
            decode=output_type != "latent",
            ring=config.ring_degree if config else 0,
            ulysses=config.ulysses_degree if config else 0,
            cfg=config.cfg_degree if config else 1,
            rotate=config.rotate_method if config else "p2p",
            backend=self.transformer.attention_backend or "",
            ranks=ranks or 0,
            threads=value["threads"],
            dtype=call["dtype"],
            sigint_stops=threading.current_thread() is threading.main_thread(),
        )
        if result is None:  # a process other than rank 0 of an mpirun launch
            return None
        if output_type == "latent":
            return self._output(self._latents_as_diffusers(result["latents"]))
        pixels = result["pixels"]
        return self._output(pixels if output_type == "np" else _to_pil(pixels))

    def _latents_as_diffusers(self, latents):
        return latents


def _to_pil(pixels):
    from PIL import Image

    bytes_ = (pixels * 255).round().astype(np.uint8)  # diffusers' numpy_to_pil
    if bytes_.ndim == 4:
        return [Image.fromarray(image) for image in bytes_]
    return [[Image.fromarray(frame) for frame in video] for video in bytes_]


def _pack_latents(latents):
    """(B, C, H, W) latents as diffusers' FLUX.1 and Qwen-Image pipelines return them for
    output_type="latent": 2x2 patches packed into tokens, (B, H/2 * W/2, C * 4)."""
    b, c, h, w = latents.shape
    return np.ascontiguousarray(
        latents.reshape(b, c, h // 2, 2, w // 2, 2).transpose(0, 2, 4, 1, 3, 5).reshape(b, (h // 2) * (w // 2), c * 4)
    )


class _ImagePipeline(_Pipeline):
    _output = ImagePipelineOutput

    def __call__(
        self,
        prompt: Optional[str] = None,
        negative_prompt: Optional[str] = None,
        height: Optional[int] = None,
        width: Optional[int] = None,
        num_inference_steps: Optional[int] = None,
        guidance_scale: Optional[float] = None,
        true_cfg_scale: Optional[float] = None,
        generator_seed: int = 0,
        latents=None,
        prompt_embeds=None,
        pooled_prompt_embeds=None,
        negative_prompt_embeds=None,
        negative_pooled_prompt_embeds=None,
        prompt_embeds_mask=None,
        negative_prompt_embeds_mask=None,
        max_sequence_length: Optional[int] = None,
        output_type: str = "pil",
        ranks: Optional[int] = None,
        threads: Optional[int] = None,
        dtype: str = "auto",
    ) -> Optional[ImagePipelineOutput]:
        """Generate images; see the class docstring. Returns None on a process other than rank 0 of an
        mpirun launch."""
        return self._run(locals())

    def _latents_as_diffusers(self, latents):
        # FLUX.1 (B, C, H, W) and Qwen-Image (B, C, 1, H, W): packed, as diffusers returns them.
        return _pack_latents(latents.reshape(latents.shape[0], latents.shape[1], *latents.shape[-2:]))


class _VideoPipeline(_Pipeline):
    _output = VideoPipelineOutput

    def __call__(
        self,
        prompt: Optional[str] = None,
        negative_prompt: Optional[str] = None,
        height: Optional[int] = None,
        width: Optional[int] = None,
        num_frames: Optional[int] = None,
        num_inference_steps: Optional[int] = None,
        guidance_scale: Optional[float] = None,
        generator_seed: int = 0,
        latents=None,
        prompt_embeds=None,
        negative_prompt_embeds=None,
        max_sequence_length: Optional[int] = None,
        output_type: str = "np",
        ranks: Optional[int] = None,
        threads: Optional[int] = None,
        dtype: str = "auto",
        **family_options,
    ) -> Optional[VideoPipelineOutput]:
        """Generate videos; see the class docstring (and its own keywords, if any). Returns None on a
        process other than rank 0 of an mpirun launch."""
        return self._run(locals())


class FluxPipeline(_ImagePipeline):
    """FLUX.1 text to image (diffusers' FluxPipeline): flow-match Euler, guidance embedding
    ``guidance_scale`` (default 3.5), true classifier-free guidance with ``negative_prompt`` (or negative
    embeddings) and ``true_cfg_scale`` > 1. ``latents``: packed initial noise (B, tokens, 64) as diffusers
    takes it; output_type "latent" returns the final latents packed the same way."""

    _pipeline_classes = ("FluxPipeline",)
    _preset_prefix = "flux-"


class QwenImagePipeline(_ImagePipeline):
    """Qwen-Image text to image (diffusers' QwenImagePipeline): ``prompt_embeds`` with
    ``prompt_embeds_mask`` (no built-in Qwen2.5-VL text encoder), true CFG ``true_cfg_scale`` (default 4.0)
    with the negative pair."""

    _pipeline_classes = ("QwenImagePipeline",)
    _preset_prefix = "qwen-"


class WanPipeline(_VideoPipeline):
    """Wan 2.1 text to video (diffusers' WanPipeline): UniPC, classifier-free guidance ``guidance_scale``
    (default 5.0) on the negative prompt (default "") or ``negative_prompt_embeds``. Latents (B, 16, F',
    H/8, W/8)."""

    _pipeline_classes = ("WanPipeline",)
    _preset_prefix = "wan-"


class SkyReelsV2DiffusionForcingPipeline(_VideoPipeline):
    """SkyReels-V2 diffusion forcing (diffusers' SkyReelsV2DiffusionForcingPipeline): blocks of latent
    frames ``ar_step`` steps apart, ``fps`` for the fps embedding; guidance as Wan (default 6.0)."""

    _pipeline_classes = ("SkyReelsV2DiffusionForcingPipeline",)
    _preset_prefix = "skyreels-"
    _family_options = ("ar_step", "fps")
