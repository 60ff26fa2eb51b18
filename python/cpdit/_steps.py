"""What a pipeline does after each step, as diffusers' pipelines do: ``callback_on_step_end`` on the
latents, and a tqdm progress bar over the steps (``set_progress_bar_config``). Both run on the engine's
rank-0 thread, with the GIL taken there (python/src/pipeline.cpp)."""

import numpy as np

from ._arrays import engine_array

# The tensors cpdit's step callback hands over: the latents (the loop holds the prompt embeddings and the
# rest constant, so a callback cannot change them).
_TENSOR_INPUTS = ("latents",)


class _StepCallback:
    """diffusers' ``callback_on_step_end(pipe, step, timestep, callback_kwargs)`` as the engine's
    on_step_latents(step, timestep, latents): the latents in callback_kwargs, and a "latents" in the dict it
    returns (numpy or torch, their shape) for the engine to put in their place. ``raised`` keeps what the
    callback raised, so that the call re-raises it as it is.

    ``pipe._interrupt`` set by the callback ends the loop after that step, its latents the result, as
    diffusers skips the steps left; the call's later generations (a list of prompts, num_images_per_prompt:
    diffusers' one batch) end after the same step."""

    def __init__(self, pipe, callback):
        self.pipe, self.callback, self.raised = pipe, callback, None
        self.interrupted_at = None  # the step after which the callback set pipe._interrupt

    def __call__(self, step, timestep, latents):
        try:
            returned = self.callback(self.pipe, step, np.float32(timestep), {"latents": latents})
        except BaseException as error:
            self.raised = error
            raise
        if self.interrupted_at is None and self.pipe._interrupt:
            self.interrupted_at = step
        new = self._latents(returned, step, latents)
        if self.interrupted_at is not None and step >= self.interrupted_at:
            return new, True
        return new

    @staticmethod
    def _latents(returned, step, latents):
        """The latents the callback returned in place of ``latents``, or None when it kept them."""
        if returned is None:
            return None
        if not isinstance(returned, dict):
            raise ValueError(f"callback_on_step_end must return a dict (callback_kwargs), got {type(returned).__name__}")
        new = returned.get("latents", latents)
        if new is latents:
            return None
        new = engine_array(new, "callback_on_step_end's latents")
        if new.shape != latents.shape:
            raise ValueError(f"callback_on_step_end returned latents of shape {tuple(new.shape)}; step {step}'s "
                             f"latents are {tuple(latents.shape)}")
        return new


def step_callback(pipe, callback, tensor_inputs):
    """The engine's on_step_latents for a call's ``callback_on_step_end`` and
    ``callback_on_step_end_tensor_inputs``, or None without a callback; what cpdit cannot do is refused."""
    names = list(_TENSOR_INPUTS) if tensor_inputs is None else list(tensor_inputs)
    unknown = [name for name in names if name not in _TENSOR_INPUTS]
    if unknown:
        raise ValueError(f"callback_on_step_end_tensor_inputs may name only {list(_TENSOR_INPUTS)} (cpdit's step "
                         f"callback sees the latents), got {unknown}")
    if callback is None:
        return None
    if hasattr(callback, "tensor_inputs"):  # diffusers.callbacks.PipelineCallback, MultiPipelineCallbacks
        raise ValueError("callback_on_step_end: diffusers' PipelineCallback objects are not supported; give a "
                         "function (pipe, step, timestep, callback_kwargs) -> callback_kwargs")
    if not callable(callback):
        raise ValueError(f"callback_on_step_end must be a function (pipe, step, timestep, callback_kwargs), got "
                         f"{type(callback).__name__}")
    return _StepCallback(pipe, callback)


class StepBar:
    """A tqdm bar over one generation's steps, opened at the first step (when the engine tells how many
    steps run) with the pipeline's progress bar config; none when that disables it or tqdm is missing."""

    def __init__(self, config):
        self.config, self.bar, self.on_step = config, None, None
        if config.get("disable"):
            return
        try:
            from tqdm.auto import tqdm  # as diffusers' progress_bar
        except ImportError:
            return
        self._tqdm = tqdm
        self.on_step = self._step

    def _step(self, step, total):
        if self.bar is None:
            self.bar = self._tqdm(total=total, **self.config)
        self.bar.update(1)

    def close(self):
        if self.bar is not None:
            self.bar.close()
