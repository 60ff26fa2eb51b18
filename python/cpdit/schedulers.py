"""diffusers' scheduler objects as a pipeline's ``pipe.scheduler``: the classes the engine implements for flow
models, each holding its ``config`` (a dict read also as attributes, as diffusers' FrozenDict), so that::

    pipe.scheduler = cpdit.DPMSolverMultistepScheduler.from_config(pipe.scheduler.config)

works as in diffusers. The engine does the stepping: a call sends the scheduler's name (``cpdit generate
--scheduler``) and, where the schedule is static, its shift (``--flow-shift``). A pipeline's default is its
folder's scheduler/scheduler_config.json, else its family's class with the class defaults.
"""

import json
import os

from ._config import Config

__all__ = ["DPMSolverMultistepScheduler", "FlowMatchEulerDiscreteScheduler", "UniPCMultistepScheduler"]


class _Scheduler:
    _defaults: dict = {}
    _requires: dict = {}  # config values the engine implements only as given

    def __init__(self, **config):
        self.config = Config({**self._defaults, **config, "_class_name": type(self).__name__})

    @classmethod
    def from_config(cls, config, **kwargs):
        """This class with ``config``'s values (another scheduler's ``config``, or a dict) and ``kwargs``
        over them; like diffusers, the keys this class has no use for are carried along and ignored."""
        values = {key: value for key, value in dict(config).items() if key != "_class_name"}
        return cls(**{**values, **kwargs})

    def __repr__(self):
        return f"{type(self).__name__} {json.dumps(dict(self.config), sort_keys=True, default=str)}"

    def _engine_choice(self):
        """(the engine's --scheduler name, its --flow-shift or None), or ValueError for a config the engine
        does not run."""
        for key, wanted in self._requires.items():
            if self.config.get(key, wanted) != wanted:
                raise ValueError(f"{type(self).__name__}: {key}={self.config[key]!r} is not supported; cpdit runs "
                                 f"{key}={wanted!r} (a flow model's schedule)")
        dynamic = self.config.get("use_dynamic_shifting", False)
        return self._name(), None if dynamic else float(self.config[self._shift_key])


class FlowMatchEulerDiscreteScheduler(_Scheduler):
    """Flow-match Euler (``--scheduler euler``); with ``stochastic_sampling=True`` Euler ancestral
    (``euler_a``), its noise drawn from the call's generator seed."""

    _defaults = {"num_train_timesteps": 1000, "shift": 1.0, "use_dynamic_shifting": False,
                 "stochastic_sampling": False}
    _requires = {"use_karras_sigmas": False, "use_exponential_sigmas": False, "use_beta_sigmas": False,
                 "invert_sigmas": False}
    _shift_key = "shift"

    def _name(self):
        return "euler_a" if self.config.get("stochastic_sampling") else "euler"


class DPMSolverMultistepScheduler(_Scheduler):
    """DPM++ 2M on flow sigmas (``--scheduler dpm++2m``): flow prediction, dpmsolver++, midpoint, order ≤ 2,
    a final sigma of zero. ``from_config`` of a flow model's config sets what those need."""

    _defaults = {"num_train_timesteps": 1000, "flow_shift": 1.0, "use_flow_sigmas": True,
                 "prediction_type": "flow_prediction", "algorithm_type": "dpmsolver++", "solver_type": "midpoint",
                 "solver_order": 2, "final_sigmas_type": "zero", "lower_order_final": True,
                 "use_dynamic_shifting": False}
    _requires = {"use_flow_sigmas": True, "prediction_type": "flow_prediction", "algorithm_type": "dpmsolver++",
                 "solver_type": "midpoint", "solver_order": 2, "final_sigmas_type": "zero",
                 "use_karras_sigmas": False, "thresholding": False}
    _shift_key = "flow_shift"

    def _name(self):
        return "dpm++2m"


class UniPCMultistepScheduler(_Scheduler):
    """UniPC on flow sigmas (``--scheduler unipc``), as Wan's pipelines use it."""

    _defaults = {"num_train_timesteps": 1000, "flow_shift": 1.0, "use_flow_sigmas": True,
                 "prediction_type": "flow_prediction", "solver_order": 2, "use_dynamic_shifting": False}
    _requires = {"use_flow_sigmas": True, "prediction_type": "flow_prediction", "solver_type": "bh2",
                 "predict_x0": True, "final_sigmas_type": "zero", "use_karras_sigmas": False}
    _shift_key = "flow_shift"

    def _name(self):
        return "unipc"


_CLASSES = {cls.__name__: cls for cls in (FlowMatchEulerDiscreteScheduler, DPMSolverMultistepScheduler,
                                          UniPCMultistepScheduler)}


def default_scheduler(pipeline):
    """A pipeline's scheduler before one is set: its folder's scheduler_config.json, else its family's class
    (UniPC for Wan and SkyReels-V2, flow-match Euler for the others) with the class defaults."""
    path = os.path.join(pipeline.model, "scheduler", "scheduler_config.json") if pipeline.model else ""
    if path and os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        cls = _CLASSES.get(config.get("_class_name"))
        if cls is not None:
            return cls.from_config(config)
    family = pipeline._pipeline_classes[0]
    if family.startswith("Wan"):
        return UniPCMultistepScheduler(flow_shift=3.0)  # Wan 2.1's
    if family.startswith("SkyReels"):
        return UniPCMultistepScheduler(flow_shift=8.0)  # SkyReels-V2 text-to-video's
    return FlowMatchEulerDiscreteScheduler(shift=3.0, use_dynamic_shifting=True)  # FLUX.1-dev's, by image size


class PipelineScheduler:
    """``pipe.scheduler``: read, it is the pipeline's scheduler (default_scheduler until one is set); set, it
    must be one of this module's classes, and the pipeline's calls run it."""

    def __get__(self, pipeline, owner=None):
        if pipeline is None:
            return self
        if "_scheduler" not in vars(pipeline):
            pipeline._scheduler, pipeline._scheduler_set = default_scheduler(pipeline), False
        return pipeline._scheduler

    def __set__(self, pipeline, scheduler):
        if not isinstance(scheduler, _Scheduler):
            names = ", ".join(sorted(_CLASSES))
            raise ValueError(f"pipe.scheduler must be a cpdit scheduler ({names}), got {type(scheduler).__name__}")
        scheduler._engine_choice()  # a config the engine does not run is refused here, not at the call
        pipeline._scheduler, pipeline._scheduler_set = scheduler, True


def apply(pipeline, request):
    """The set scheduler onto the engine's request: its name, and its shift where that is static and not the
    default scheduler's (the engine keeps the pipeline's own schedule otherwise). Nothing when none was set."""
    if vars(pipeline).get("_scheduler_set"):
        request.scheduler, shift = pipeline._scheduler._engine_choice()
        if shift is not None and shift != default_scheduler(pipeline)._engine_choice()[1]:
            request.flow_shift = shift
