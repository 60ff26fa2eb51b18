"""A pipeline's VAE as diffusers' ``pipe.vae``: its ``config`` and ``decode``, for the scripts that take
latents (``output_type="latent"``) and decode them themselves::

    latents = pipe(prompt, output_type="latent").images          # FLUX.1: packed (B, tokens, C * 4)
    ... unpack, then latents / pipe.vae.config.scaling_factor + pipe.vae.config.shift_factor
    image = pipe.vae.decode(latents, return_dict=False)[0]       # (B, 3, H, W) in [-1, 1]

The engine's VAE decodes, its rows split over the ranks of the pipeline's parallel config (exact, not
tiled).
"""

import dataclasses
import json
import warnings
from typing import Any

from ._arrays import engine_array, like_input
from ._config import Config
from ._keywords import with_keywords


@dataclasses.dataclass
class DecoderOutput:
    """diffusers' ``DecoderOutput``: ``sample``, (B, 3, H, W) or (B, 3, F, H, W), float32 in [-1, 1]."""

    sample: Any


class PipelineVAE:
    """The VAE of a pipeline (AutoencoderKL, AutoencoderKLWan, AutoencoderKLQwenImage or
    AutoencoderKLLTXVideo, as ``config["_class_name"]`` says), opened with the pipeline."""

    def __init__(self, pipe):
        self._pipe = pipe
        self._config = None

    def _engine(self):
        return self._pipe._opened(self._pipe.dtype)

    @property
    def config(self):
        """The VAE's config by diffusers' names (``scaling_factor``, ``shift_factor``, ``latent_channels``,
        ``latents_mean``, ``latents_std``, ``z_dim``, ...), as the engine read it."""
        if self._config is None:
            try:
                self._config = Config(json.loads(self._engine().vae_config()))
            except (ValueError, RuntimeError) as error:
                raise with_keywords(error) from None
        return self._config

    def decode(self, z, return_dict=True, generator=None):
        """diffusers' ``vae.decode(z)``: ``z`` the decoder's input (the pipeline's unscaling done by the
        caller), a numpy array or a CPU torch tensor; returns ``DecoderOutput(sample)`` or ``(sample,)``,
        a torch tensor when ``z`` is one. ``generator`` is taken and unused: decoding draws nothing."""
        config = self._pipe.transformer.parallel_config
        ranks = config.world_size if config is not None else 1
        try:
            sample = self._engine().decode_vae(engine_array(z, "z"), ranks)
        except (ValueError, RuntimeError) as error:
            raise with_keywords(error) from None
        sample = like_input(sample, z)
        return DecoderOutput(sample) if return_dict else (sample,)

    def _exact(self, call):
        warnings.warn(f"vae.{call}(): cpdit decodes whole, exactly, its rows split over the ranks; there are no "
                      "tiles or slices to turn on or off, and the call changes nothing", stacklevel=3)

    def enable_tiling(self, *args, **kwargs):
        """Accepted for diffusers scripts; see _exact: nothing changes, and a warning says so."""
        self._exact("enable_tiling")

    def disable_tiling(self):
        self._exact("disable_tiling")

    def enable_slicing(self):
        self._exact("enable_slicing")

    def disable_slicing(self):
        self._exact("disable_slicing")
