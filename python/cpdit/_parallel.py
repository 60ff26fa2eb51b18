"""Context parallelism as diffusers spells it: a config, and the transformer that takes it (and its step
cache, _cache.py)."""

from . import _cpdit
from ._cache import CACHE_CONFIGS
from ._checks import checked, checked_degree

__all__ = ["ContextParallelConfig", "Transformer"]


class ContextParallelConfig:
    """How the tokens of one generation are split across ranks.

    ``ring_degree`` x ``ulysses_degree`` ranks run one pass of the transformer: Ulysses groups are
    contiguous ranks (all-to-all of heads), the ring passes K and V around (``rotate_method`` "p2p":
    double-buffered point to point; "allgather": one all-gather). ``cfg_degree`` 2 runs the conditional
    and unconditional passes of classifier-free guidance on two such groups at once. Impossible values
    raise ValueError with the engine's message.
    """

    def __init__(self, ring_degree=1, ulysses_degree=1, rotate_method="p2p", cfg_degree=1):
        # Whole numbers the engine's int holds and a string here; their ranges are the engine's to check, in
        # its words.
        ring_degree, ulysses_degree, cfg_degree = (checked_degree(name, value) for name, value in (
            ("ring_degree", ring_degree), ("ulysses_degree", ulysses_degree), ("cfg_degree", cfg_degree)))
        rotate_method = checked("rotate_method", rotate_method, str)
        _cpdit.check_parallel_config(ring_degree, ulysses_degree, cfg_degree, rotate_method)
        self.ring_degree = ring_degree
        self.ulysses_degree = ulysses_degree
        self.rotate_method = rotate_method
        self.cfg_degree = cfg_degree

    @property
    def world_size(self):
        """The ranks the config needs: cfg x ring x Ulysses."""
        return self.cfg_degree * self.ring_degree * self.ulysses_degree

    def __repr__(self):
        return (
            f"ContextParallelConfig(ring_degree={self.ring_degree}, ulysses_degree={self.ulysses_degree}, "
            f"rotate_method={self.rotate_method!r}, cfg_degree={self.cfg_degree})"
        )


class Transformer:
    """A pipeline's denoising transformer: how its attention runs when the pipeline is called.

    The weights stay in the engine; this object holds the choices diffusers makes on the model.
    """

    def __init__(self):
        self.parallel_config = None
        self.attention_backend = None
        self._cache_config = None

    def enable_parallelism(self, config):
        """Split the transformer's tokens as ``config`` (a :class:`ContextParallelConfig`) says."""
        if not isinstance(config, ContextParallelConfig):
            raise ValueError(f"enable_parallelism takes a cpdit.ContextParallelConfig, got {type(config).__name__}")
        self.parallel_config = config

    def set_attention_backend(self, backend):
        """Run attention on ``backend`` ("flash" or "native"); an unknown name raises ValueError."""
        _cpdit.check_attention_backend(backend)
        self.attention_backend = backend

    @property
    def is_cache_enabled(self):
        return self._cache_config is not None

    def enable_cache(self, config):
        """Run the pipeline's calls with a step cache: a :class:`FirstBlockCacheConfig`,
        :class:`MagCacheConfig` or :class:`TaylorSeerCacheConfig` (FLUX.1 and Wan). As diffusers, one at a
        time: disable_cache() first to change it."""
        if not isinstance(config, CACHE_CONFIGS):
            raise ValueError(f"Cache config {type(config).__name__} is not supported: give a cpdit."
                             "FirstBlockCacheConfig, MagCacheConfig or TaylorSeerCacheConfig")
        if self._cache_config is not None:
            raise ValueError(f"Caching has already been enabled with {type(self._cache_config).__name__}: "
                             "disable_cache() first")
        self._cache_config = config

    def disable_cache(self):
        """Run every block of every step again."""
        if self._cache_config is None:
            raise ValueError("Caching techniques have not been enabled, so there's nothing to disable")
        self._cache_config = None
