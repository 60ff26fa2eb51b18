"""diffusers' step caches, configured as diffusers names them and enabled on a pipeline's transformer
(``pipe.transformer.enable_cache(config)``); each config is the engine's ``--cache`` spec underneath
(docs/commands.md, "Step caches"), checked by the engine when it is made."""

from . import _cpdit
from ._checks import checked

__all__ = ["FirstBlockCacheConfig", "MagCacheConfig", "TaylorSeerCacheConfig"]


def _engine_checked(spec):
    """``spec`` as the engine reads it, or its ValueError."""
    _cpdit.Request().cache = spec
    return spec


class FirstBlockCacheConfig:
    """Skip the blocks after the first while the first block's residual changes by at most ``threshold``
    (relative mean absolute change), reusing what they added when they last ran."""

    def __init__(self, threshold=0.05):
        self.threshold = checked("threshold", threshold, float)
        self._spec = _engine_checked(f"fbcache:{self.threshold!r}")

    def __repr__(self):
        return f"FirstBlockCacheConfig(threshold={self.threshold!r})"


class MagCacheConfig:
    """Skip the blocks while the error accumulated from the per-step magnitude ratios stays within
    ``threshold``. ``mag_ratios`` are the model's (a ``calibrate=True`` run prints them; FLUX.1 has
    diffusers' FLUX_MAG_RATIOS when none are given). diffusers resamples them to ``num_inference_steps``;
    the engine resamples them to the call's steps, so that keyword is taken for diffusers' code and
    changes nothing."""

    def __init__(self, threshold=0.06, max_skip_steps=3, retention_ratio=0.2, num_inference_steps=28,
                 mag_ratios=None, calibrate=False):
        self.threshold = checked("threshold", threshold, float)
        self.max_skip_steps = checked("max_skip_steps", max_skip_steps, 0)
        self.retention_ratio = checked("retention_ratio", retention_ratio, float)
        self.num_inference_steps = checked("num_inference_steps", num_inference_steps, 1)
        self.calibrate = checked("calibrate", calibrate, bool)
        self.mag_ratios = None if mag_ratios is None else [checked("mag_ratios", float(r), float) for r in mag_ratios]
        if self.calibrate:
            spec = "magcache:calibrate"
        else:
            spec = (f"magcache:{self.threshold!r},max_skip_steps={self.max_skip_steps},"
                    f"retention_ratio={self.retention_ratio!r}")
            if self.mag_ratios is not None:
                spec += ",ratios=" + "/".join(repr(r) for r in self.mag_ratios)
        self._spec = _engine_checked(spec)

    def __repr__(self):
        return (f"MagCacheConfig(threshold={self.threshold!r}, max_skip_steps={self.max_skip_steps}, "
                f"retention_ratio={self.retention_ratio!r}, mag_ratios={self.mag_ratios!r}, "
                f"calibrate={self.calibrate})")


class TaylorSeerCacheConfig:
    """Predict the attention modules' outputs (or those whose diffusers paths ``cache_identifiers``
    fully match) by a Taylor series of order ``max_order``, between the calls that compute them: the
    first ``disable_cache_before_step`` and every ``cache_interval``-th after (all from
    ``disable_cache_after_step`` on). ``taylor_factors_dtype`` "bfloat16" (diffusers' default) or
    "float32" (a torch dtype is taken by its name). diffusers' ``skip_predict_identifiers`` and
    ``use_lite_mode`` are not supported and raise ValueError."""

    def __init__(self, cache_interval=5, disable_cache_before_step=3, disable_cache_after_step=None, max_order=1,
                 taylor_factors_dtype="bfloat16", skip_predict_identifiers=None, cache_identifiers=None,
                 use_lite_mode=False):
        if skip_predict_identifiers or use_lite_mode:
            raise ValueError("TaylorSeerCacheConfig: skip_predict_identifiers and use_lite_mode are not supported")
        self.cache_interval = checked("cache_interval", cache_interval, 1)
        self.disable_cache_before_step = checked("disable_cache_before_step", disable_cache_before_step, 0)
        self.disable_cache_after_step = (None if disable_cache_after_step is None else
                                         checked("disable_cache_after_step", disable_cache_after_step, 0))
        self.max_order = checked("max_order", max_order, 0)
        dtype = str(taylor_factors_dtype).removeprefix("torch.")
        if dtype not in ("bfloat16", "float32"):
            raise ValueError(f"taylor_factors_dtype must be bfloat16 or float32, got {taylor_factors_dtype!r}")
        self.taylor_factors_dtype = dtype
        self.cache_identifiers = (None if cache_identifiers is None else
                                  [checked("cache_identifiers", p, str) for p in cache_identifiers])
        spec = (f"taylorseer:interval={self.cache_interval},before={self.disable_cache_before_step},"
                f"order={self.max_order},factors={'f32' if dtype == 'float32' else 'bf16'}")
        if self.disable_cache_after_step is not None:
            spec += f",after={self.disable_cache_after_step}"
        for pattern in self.cache_identifiers or []:
            if "," in pattern:
                raise ValueError(f"cache_identifiers: a pattern may not hold a comma, got {pattern!r}")
            spec += f",module={pattern}"
        self._spec = _engine_checked(spec)

    def __repr__(self):
        return (f"TaylorSeerCacheConfig(cache_interval={self.cache_interval}, "
                f"disable_cache_before_step={self.disable_cache_before_step}, "
                f"disable_cache_after_step={self.disable_cache_after_step}, max_order={self.max_order}, "
                f"taylor_factors_dtype={self.taylor_factors_dtype!r}, cache_identifiers={self.cache_identifiers!r})")


CACHE_CONFIGS = (FirstBlockCacheConfig, MagCacheConfig, TaylorSeerCacheConfig)
