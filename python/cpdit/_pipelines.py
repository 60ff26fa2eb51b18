"""Pipelines with diffusers' call signature, run by the engine's generate job.

Each pipeline is a diffusers pipeline folder (``save_pretrained``'s layout: model_index.json,
transformer/, scheduler/, vae/, and the tokenizers and text encoders when it has them) or a built-in
preset with seeded random weights. A call runs the same stages as ``cpdit generate``: encode the prompt
(or take ``prompt_embeds``), denoise, decode.

A pipeline class is data: the model_index.json classes it runs, its presets' prefix, its output, the
keywords its call takes beside the shared ones, its default output_type and how diffusers lays out its
final latents. One ``__call__`` serves every class, with the class's own signature (``help(pipe)``,
``inspect.signature``), so an argument the pipeline does not take is a TypeError as in any Python call.
"""

import dataclasses
import inspect
import json
import os
import tempfile
import threading
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from . import _cpdit
from ._arrays import engine_array
from ._checks import checked
from ._keywords import with_keywords
from ._lora import LoraMethods
from ._parallel import Transformer
from . import schedulers as _schedulers
from ._steps import StepBar, step_callback
from ._vae import PipelineVAE

__all__ = [
    "FluxImg2ImgPipeline",
    "FluxPipeline",
    "ImagePipelineOutput",
    "LTXPipeline",
    "QwenImageImg2ImgPipeline",
    "QwenImagePipeline",
    "SkyReelsV2DiffusionForcingPipeline",
    "SkyReelsV2ImageToVideoPipeline",
    "VideoPipelineOutput",
    "WanImageToVideoPipeline",
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


# The keywords that set an option of a request, by diffusers' names: the Request field each one sets
# (include/cpdit/pipeline/request.hpp; `cpdit generate --help` says what each means) and what
# it takes, as the command line checks it (_checks.checked: a string, a finite number, or a whole
# number from 0 or 1).
_SETTINGS = {
    "negative_prompt": ("negative_prompt", str),
    "random_embeddings": ("random_embeddings", bool),  # a model run without prompt or prompt_embeds
    "height": ("height", 1),
    "width": ("width", 1),
    "num_frames": ("frames", 1),
    "num_inference_steps": ("steps", 1),
    "guidance_scale": ("guidance", float),
    "guidance_scale_2": ("guidance_2", float),  # Wan 2.2's low-noise expert
    "true_cfg_scale": ("true_cfg_scale", float),
    "generator_seed": ("seed", 0),
    "max_sequence_length": ("text_tokens", 1),
    "ar_step": ("ar_step", 0),
    "fps": ("fps", 1),  # SkyReels-V2's fps embedding
    "frame_rate": ("fps", 1),  # LTX-Video's RoPE time scale
    "base_num_frames": ("base_num_frames", 1),
    "overlap_history": ("overlap_history", 1),
    "addnoise_condition": ("addnoise_condition", float),
    "strength": ("strength", float),
    "decode_timestep": ("decode_timestep", float),
    "decode_noise_scale": ("decode_noise_scale", float),
}

# What every pipeline's call takes after ``prompt``. Besides these and _SETTINGS, a call's keywords are
# the prompt embeddings and masks, by the names of diffusers' pipelines (and of the --embeddings file).
_SHARED_KEYWORDS = ("negative_prompt", "height", "width", "num_inference_steps", "guidance_scale", "generator",
                    "generator_seed", "latents", "prompt_embeds", "negative_prompt_embeds", "max_sequence_length",
                    "output_type", "return_dict", "num_images_per_prompt", "callback_on_step_end",
                    "callback_on_step_end_tensor_inputs", "random_embeddings", "ranks", "threads", "dtype")

# The weights' dtypes in memory (cpdit generate --dtype; nn/load.hpp), and torch's dtypes as those, by
# their names: torch itself is not needed to run cpdit, so a dtype is known by str(dtype).
_ENGINE_DTYPES = ("auto", "f32", "bf16", "q8_0", "q4_k")
_TORCH_DTYPES = {"torch.float32": "f32", "torch.float": "f32", "torch.bfloat16": "bf16"}


def _dtype_of(value, name):
    """The engine's dtype for a torch dtype (or one of the engine's own names), else ValueError."""
    if isinstance(value, str) and value in _ENGINE_DTYPES:
        return value
    if str(value) in _TORCH_DTYPES:
        return _TORCH_DTYPES[str(value)]
    raise ValueError(f"{name} must be torch.float32, torch.bfloat16 or one of 'auto', 'f32', 'bf16', 'q8_0', "
                     f"'q4_k' (cpdit keeps no float16 weights), got {value!r}")


def _seed_of(generator):
    """The engine's seed for diffusers' ``generator=``: an int, a torch.Generator (its initial_seed()), or a
    numpy.random.Generator (its next draw)."""
    if isinstance(generator, np.random.Generator):
        return int(generator.integers(0, 2**63))
    if hasattr(generator, "initial_seed"):
        return checked("generator.initial_seed()", generator.initial_seed(), 0)
    return checked("generator", generator, 0)


def _to_pil(pixels):
    from PIL import Image

    bytes_ = (pixels * 255).round().astype(np.uint8)  # diffusers' numpy_to_pil
    if bytes_.ndim == 4:
        return [Image.fromarray(image) for image in bytes_]
    return [[Image.fromarray(frame) for frame in video] for video in bytes_]


def _latents_as_they_are(latents):
    return latents


def _packed_2x2(latents):
    """FLUX.1's (B, C, H, W) and Qwen-Image's (B, C, 1, H, W) latents as their diffusers pipelines
    return them: 2x2 patches packed into tokens, (B, H/2 * W/2, C * 4)."""
    b, c, h, w = latents.shape[0], latents.shape[1], *latents.shape[-2:]
    return np.ascontiguousarray(
        latents.reshape(b, c, h // 2, 2, w // 2, 2).transpose(0, 2, 4, 1, 3, 5).reshape(b, (h // 2) * (w // 2), c * 4)
    )


def _packed_tokens(latents):
    """LTX-Video's (B, C, F, H, W) latents as LTXPipeline returns them: one token per latent voxel,
    (B, F * H * W, C)."""
    b, c = latents.shape[:2]
    return np.ascontiguousarray(latents.reshape(b, c, -1).transpose(0, 2, 1))


class _Pipeline(LoraMethods):
    # Set by each family (see the module's docstring).
    _pipeline_classes: tuple = ()
    _preset_prefix = ""
    _output: Any = None  # ImagePipelineOutput or VideoPipelineOutput
    _output_type = "pil"
    _keywords: tuple = ()  # the call's keywords beside _SHARED_KEYWORDS
    _latents = staticmethod(_latents_as_they_are)  # the engine's final latents as diffusers returns them
    _images: dict = {}  # the keywords that give an image: the Request field (a picture path) each one sets
    scheduler = _schedulers.PipelineScheduler()  # diffusers' pipe.scheduler (schedulers.py)

    def __init__(self, model="", preset="", dtype="auto"):
        self.model = model
        self.preset = preset
        self.dtype = dtype  # the weights' dtype in memory when a call gives none
        self.transformer = Transformer()
        self._engine = None  # the opened pipeline, kept between calls
        self._engine_dtype = None
        self._progress_bar_config = {}
        self._interrupt = False  # diffusers': set by a step callback, the call's loop ends after that step
        self._single_file = ""  # from_single_file: the transformer's weights file (self.model, or beside a folder)
        self._config = ""  # from_single_file's config=: a transformer config.json overriding the file's
        self._vae = None  # pipe.vae, made at its first use

    @property
    def vae(self):
        """diffusers' ``pipe.vae``: the pipeline's VAE, its config and decode (_vae.py)."""
        if self._vae is None:
            self._vae = PipelineVAE(self)
        return self._vae

    @property
    def interrupt(self):
        """diffusers' ``pipe.interrupt``: whether a step callback of this call set ``pipe._interrupt``."""
        return self._interrupt

    def set_progress_bar_config(self, **kwargs):
        """diffusers' progress bar settings: the keywords of the tqdm bar each generation shows over its steps
        on stderr (``disable=True``: no bar; ``desc``, ``leave``, ``position``, ``file``, ...). Without tqdm
        installed there is no bar."""
        self._progress_bar_config = kwargs

    def to(self, *args, device=None, dtype=None):
        """diffusers' ``pipe.to("cpu")`` or ``pipe.to(torch.bfloat16)`` (or both): cpdit runs on CPUs, so a
        device other than the CPU is refused; a dtype sets the weights' dtype for the next calls."""
        for value in args:
            if str(value).startswith("torch.") or value in _ENGINE_DTYPES:
                dtype = value
            else:
                device = value
        if device is not None and str(device).split(":")[0] != "cpu":
            raise ValueError(f"cpdit runs on CPUs: there is no {str(device)!r} device to move the pipeline to; "
                             "use .to('cpu') or leave it out")
        if dtype is not None:
            self.dtype = _dtype_of(dtype, "dtype")
        return self

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        parameter = inspect.Parameter
        positional = [parameter("self", parameter.POSITIONAL_OR_KEYWORD),
                      parameter("prompt", parameter.POSITIONAL_OR_KEYWORD, default=None)]
        keywords = [parameter(name, parameter.KEYWORD_ONLY, default=cls._output_type if name == "output_type" else None)
                    for name in _SHARED_KEYWORDS + cls._keywords]
        signature = inspect.Signature(positional + keywords)

        def __call__(self, prompt=None, **options):
            call = signature.bind(self, prompt, **options)  # TypeError for a keyword this pipeline does not take
            call.apply_defaults()
            del call.arguments["self"]
            return self._run(call.arguments)

        __call__.__signature__ = signature
        __call__.__qualname__ = f"{cls.__name__}.__call__"
        __call__.__doc__ = (
            f"Generate, with the arguments of diffusers' {cls._pipeline_classes[0]}.__call__ (see the class "
            "docstring); None: the pipeline's default. ``generator`` (an int, a torch.Generator by its initial_seed(), "
            "a numpy.random.Generator) or ``generator_seed`` seeds the engine's noise, ``return_dict=False`` "
            "returns a tuple, ``random_embeddings=True`` runs a model given neither prompt nor prompt_embeds on "
            "random text embeddings (a test; presets do it unasked). ``callback_on_step_end(pipe, step, timestep, "
            "callback_kwargs)`` is called after each "
            "step's scheduler step with callback_kwargs {'latents': the whole latents as diffusers holds them then, a "
            "read-only numpy array}; a 'latents' it returns (numpy or torch, their shape) replaces them on every rank "
            "(``callback_on_step_end_tensor_inputs``: ['latents'], the only one), and ``pipe._interrupt = True`` in it "
            "ends the loop after that step, its latents the result; each generation of a list of prompts or "
            "of num_images_per_prompt calls it with its own batch of one. ``ranks`` and "
            "``threads`` set the local ranks and each one's compute threads, ``dtype`` the transformer's weights in "
            "memory ('auto', 'f32', 'bf16', 'q8_0', 'q4_k': cpdit generate --dtype). Returns None on a process "
            "other than rank 0 of an mpirun launch.")
        cls.__call__ = __call__

    if TYPE_CHECKING:  # what type checkers see of the __call__ each class gets above

        def __call__(self, prompt: Optional[str] = None, **options: Any) -> Any: ...

    @classmethod
    def from_pretrained(cls, path, torch_dtype=None, **unused):
        """A diffusers pipeline folder (or a transformer folder or checkpoint file, without text encoders
        or VAE). Nothing is loaded until the pipeline is first called; then its models stay loaded for
        every later call (when they fit in half of the free memory; otherwise each stage loads its
        model when it starts and frees it when it ends). ``torch_dtype`` (torch.bfloat16, torch.float32)
        is the transformer's weights' dtype in memory; the other keywords of diffusers' from_pretrained
        (variant, use_safetensors, ...) change nothing here."""
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
        return cls(model=path, dtype="auto" if torch_dtype is None else _dtype_of(torch_dtype, "torch_dtype"))

    @classmethod
    def from_single_file(cls, path, config=None, torch_dtype=None, **unused):
        """diffusers' from_single_file: a transformer checkpoint in one file (.safetensors, in diffusers' or the
        original layout, or .gguf), its class and sizes read from the file, as ``cpdit generate --model FILE``
        opens it. ``config``: a diffusers pipeline folder whose text encoders, scheduler and VAE run around the
        file's weights (read with the folder's transformer/config.json), or a transformer config.json (or its
        folder) overriding what the file tells. Without a pipeline folder there are no text encoders or VAE: call
        with ``prompt_embeds`` and ``output_type="latent"``. ``torch_dtype`` as from_pretrained."""
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise ValueError(f"{cls.__name__}.from_single_file: path {path} is not a file (a folder loads with "
                             "from_pretrained)")
        if not path.endswith((".safetensors", ".gguf")):
            raise ValueError(f"{cls.__name__}.from_single_file: path {path} is neither .safetensors nor .gguf")
        config = None if config is None else os.fspath(config)
        if config is not None and not os.path.exists(config):
            raise ValueError(f"{cls.__name__}.from_single_file: config={config} does not exist")
        if config is not None and os.path.isdir(config) and os.path.isfile(os.path.join(config, "model_index.json")):
            pipe = cls.from_pretrained(config, torch_dtype=torch_dtype)  # the folder's class checked there
        else:
            if config is not None and os.path.isdir(config):
                config = os.path.join(config, "config.json")
            pipe = cls(model=path, dtype="auto" if torch_dtype is None else _dtype_of(torch_dtype, "torch_dtype"))
            pipe._config = config or ""
        pipe._single_file = path
        return pipe

    @classmethod
    def from_preset(cls, name):
        """A built-in pipeline with seeded random weights (``cpdit generate --preset``), e.g. "flux-tiny"."""
        if not name.startswith(cls._preset_prefix):
            raise ValueError(f"{cls.__name__} runs the {cls._preset_prefix}* presets, not {name!r}")
        return cls(preset=name)

    def _run(self, call):
        """The generations of a call, every keyword of the signature present: one per prompt of a list
        and per ``num_images_per_prompt``, one after another on the opened pipeline, their outputs joined
        along the batch as diffusers returns a batch (image ``j`` of a prompt is seeded
        ``generator_seed + j``)."""
        prompt, output_type, latents = call.pop("prompt"), call.pop("output_type"), call.pop("latents")
        ranks, threads, dtype = call.pop("ranks"), call.pop("threads"), call.pop("dtype")
        generator, return_dict = call.pop("generator"), call.pop("return_dict")
        if generator is not None:
            if call["generator_seed"] is not None:
                raise ValueError("give generator or generator_seed, not both")
            call["generator_seed"] = _seed_of(generator)
        # diffusers' sigmas= (FluxPipeline, QwenImagePipeline): the schedule's sigmas, their count the steps.
        sigmas = call.pop("sigmas", None)
        if sigmas is not None:
            if isinstance(sigmas, (str, bytes)) or not hasattr(sigmas, "__len__") or not len(sigmas):
                raise ValueError(f"sigmas must be a non-empty list of numbers, got {sigmas!r}")
            sigmas = [checked("sigmas", float(s) if isinstance(s, np.floating) else s, float) for s in sigmas]
        per_prompt = call.pop("num_images_per_prompt")
        per_prompt = 1 if per_prompt is None else checked("num_images_per_prompt", per_prompt, 1)
        if output_type not in ("pil", "np", "latent"):
            raise ValueError(f"output_type must be 'pil', 'np' or 'latent', got {output_type!r}")
        if prompt is not None and call["prompt_embeds"] is not None:
            raise ValueError("give prompt or prompt_embeds, not both")
        prompts = [prompt] if prompt is None or isinstance(prompt, str) else prompt
        if prompt is not None and (not isinstance(prompts, (list, tuple)) or not prompts
                                   or not all(isinstance(p, str) for p in prompts)):
            raise ValueError(f"prompt must be a string or a non-empty list of strings, got {prompt!r}")
        if prompt is not None:
            prompts = [checked("prompt", p, str) for p in prompts]
        callback = step_callback(self, call.pop("callback_on_step_end"), call.pop("callback_on_step_end_tensor_inputs"))
        self._interrupt = False  # as diffusers' call starts
        if output_type != "latent" and self._single_file and self._single_file == self.model:
            raise ValueError("from_single_file without a pipeline folder has no VAE to decode with: call with "
                             "output_type='latent', or give config= a diffusers pipeline folder")
        engine = self._opened(self.dtype if dtype is None else _dtype_of(dtype, "dtype"))
        seed = call["generator_seed"]
        seed = 0 if seed is None else checked("generator_seed", seed, 0)
        outputs = []
        with tempfile.TemporaryDirectory(prefix="cpdit_images_") as folder:
            images = {name: _png_path(call.pop(name), name, folder)
                      for name in self._images if call.get(name) is not None}
            for text in prompts:
                for image in range(per_prompt):
                    args = _cpdit.Request()
                    args.prompt, args.decode = text, output_type != "latent"
                    args.loras = self._lora_pairs()
                    if sigmas is not None:
                        args.sigmas = sigmas
                    for name, path in images.items():
                        setattr(args, self._images[name], path)
                    outputs.append(self._generate(engine, args, dict(call, generator_seed=seed + image), latents,
                                                  output_type, ranks, threads, callback))
        if outputs[0] is None:  # a process other than rank 0 of an mpirun launch
            return None
        output = outputs[0] if len(outputs) == 1 else _joined(outputs)
        return output if return_dict is None or return_dict else (getattr(output, dataclasses.fields(output)[0].name),)

    def _opened(self, dtype):
        """The engine's pipeline for ``dtype``: opened at the first call, kept for the next ones (another
        dtype reopens it)."""
        if self._engine is None or self._engine_dtype != dtype:
            source = _cpdit.PipelineSource()
            source.model, source.preset, source.dtype = self.model, self.preset, dtype
            if self._single_file:
                source.transformer = "" if self._single_file == self.model else self._single_file
                source.config = self._config
            self._engine, self._engine_dtype = None, None  # the old one is freed before the new one loads
            try:
                self._engine, self._engine_dtype = _cpdit.Pipeline.open(source), dtype
            except (ValueError, RuntimeError) as error:
                raise with_keywords(error) from None
        return self._engine

    def _generate(self, engine, args, call, latents, output_type, ranks, threads, callback):
        embeddings = {}
        for name, value in call.items():
            if value is None:  # the engine's default, which is the pipeline's
                continue
            if name in _SETTINGS:
                field, kind = _SETTINGS[name]
                _set(args, field, name, checked(name, value, kind))
            else:  # prompt masks as diffusers makes them (int64 0/1), embeddings float32; read in place when they are
                embeddings[name] = engine_array(value, name, np.int64 if name.endswith("_mask") else np.float32)
        self._set_parallel(args.parallel, ranks, threads)
        if self.transformer.is_cache_enabled:
            args.cache = self.transformer._cache_config._spec
        _schedulers.apply(self, args)
        bar = StepBar(self._progress_bar_config)
        try:
            result = engine.run(args, embeddings, None if latents is None else engine_array(latents, "latents"),
                                sigint_stops=threading.current_thread() is threading.main_thread(),
                                on_step=bar.on_step, on_step_latents=callback)
        except (ValueError, RuntimeError) as error:
            if callback is not None and error is callback.raised:  # the caller's own exception, as it raised it
                raise
            raise with_keywords(error) from None
        finally:
            bar.close()
        if result is None:  # a process other than rank 0 of an mpirun launch
            return None
        if output_type == "latent":
            return self._output(self._latents(result["latents"]))
        pixels = result["pixels"]
        return self._output(pixels if output_type == "np" else _to_pil(pixels))


    def _set_parallel(self, flags, ranks, threads):
        """The transformer's parallel config and attention backend, and the call's ranks and threads, as
        the engine's --ring, --ulysses, --cfg-parallel, --rotate, --backend, --ranks, --threads."""
        config = self.transformer.parallel_config
        if config is not None:
            flags.ring, flags.ulysses = config.ring_degree, config.ulysses_degree
            flags.cfg, flags.rotate = config.cfg_degree, config.rotate_method
        flags.backend = self.transformer.attention_backend or ""
        # Under mpirun the processes are the ranks; otherwise ranks=, else the config's, else one.
        if ranks is None and not _cpdit.launched_by_mpi():
            ranks = config.world_size if config is not None else 1
        if ranks is not None:
            _set(flags, "ranks", "ranks", checked("ranks", ranks, 1))
        if threads is not None:
            _set(flags, "threads", "threads", checked("threads", threads, 1))


def _joined(outputs):
    """Several calls' outputs as one batch: arrays stacked along the batch, lists of PIL images joined."""
    field = dataclasses.fields(outputs[0])[0].name
    parts = [getattr(output, field) for output in outputs]
    joined = np.concatenate(parts) if isinstance(parts[0], np.ndarray) else [item for part in parts for item in part]
    return type(outputs[0])(joined)

def _png_path(image, name, folder):
    """A picture file (PNG, JPEG or WebP) the engine reads for ``image``: the path itself when it is one,
    else the PIL image written losslessly as RGB into ``folder``."""
    if isinstance(image, (str, os.PathLike)):
        return os.fspath(image)
    if not hasattr(image, "convert") or not hasattr(image, "save"):
        raise ValueError(f"{name} must be a PIL image or a PNG, JPEG or WebP path, got {type(image).__name__}")
    path = os.path.join(folder, f"{name}.png")
    image.convert("RGB").save(path, format="PNG")
    return path


def _set(args, field, name, value):
    """args.field = value, or ValueError when the field's C++ type cannot hold it."""
    try:
        setattr(args, field, value)
    except TypeError:  # the checks passed, so only the range is left: a count past int64, a seed past uint64
        raise ValueError(f"{name} {value} is too large") from None


class FluxPipeline(_Pipeline):
    """FLUX.1 text to image (diffusers' FluxPipeline): flow-match Euler, guidance embedding
    ``guidance_scale`` (default 3.5), true classifier-free guidance with ``negative_prompt`` (or negative
    embeddings) and ``true_cfg_scale`` > 1. ``latents``: packed initial noise (B, tokens, 64) as diffusers
    takes it; output_type "latent" returns the final latents packed the same way."""

    _pipeline_classes = ("FluxPipeline",)
    _preset_prefix = "flux-"
    _output = ImagePipelineOutput
    _keywords = ("true_cfg_scale", "pooled_prompt_embeds", "negative_pooled_prompt_embeds", "sigmas")
    _latents = staticmethod(_packed_2x2)


class FluxImg2ImgPipeline(FluxPipeline):
    """FLUX.1 image to image (diffusers' FluxImg2ImgPipeline): ``image`` (a PIL image or a picture path) through
    the folder's VAE, the schedule's first steps skipped by ``strength`` (default 0.6) and the loop started
    from the image's latents noised to the first step kept; otherwise as FluxPipeline. Loads FluxPipeline
    folders too, as diffusers does."""

    _pipeline_classes = ("FluxImg2ImgPipeline", "FluxPipeline")
    _keywords = FluxPipeline._keywords + ("image", "strength")
    _images = {"image": "init_image"}


class QwenImagePipeline(_Pipeline):
    """Qwen-Image text to image (diffusers' QwenImagePipeline): ``prompt`` through the folder's Qwen2.5-VL
    text encoder (``max_sequence_length`` at most 1024), or ``prompt_embeds`` with ``prompt_embeds_mask``;
    true CFG ``true_cfg_scale`` (default 4.0) with ``negative_prompt`` (default " ") or the negative pair.
    ``latents`` and output_type "latent" packed as FLUX.1's."""

    _pipeline_classes = ("QwenImagePipeline",)
    _preset_prefix = "qwen-"
    _output = ImagePipelineOutput
    _keywords = ("true_cfg_scale", "prompt_embeds_mask", "negative_prompt_embeds_mask", "sigmas")
    _latents = staticmethod(_packed_2x2)


class QwenImageImg2ImgPipeline(QwenImagePipeline):
    """Qwen-Image image to image (diffusers' QwenImageImg2ImgPipeline): ``image`` (a PIL image or a picture path)
    through the folder's VAE, the schedule's first steps skipped by ``strength`` (default 0.6) and the loop
    started from the image's latents noised to the first step kept; otherwise as QwenImagePipeline. Loads
    QwenImagePipeline folders too, as diffusers does."""

    _pipeline_classes = ("QwenImageImg2ImgPipeline", "QwenImagePipeline")
    _keywords = QwenImagePipeline._keywords + ("image", "strength")
    _images = {"image": "init_image"}

class WanPipeline(_Pipeline):
    """Wan 2.1 and 2.2 text to video (diffusers' WanPipeline): UniPC, classifier-free guidance
    ``guidance_scale`` (default 5.0) on the negative prompt (default "") or ``negative_prompt_embeds``; a
    folder with transformer_2/ (Wan 2.2 A14B) hands the steps below its boundary_ratio to it, guided at
    ``guidance_scale_2`` (default: guidance_scale). Latents (B, 16, F', H/8, W/8)."""

    _pipeline_classes = ("WanPipeline",)
    _preset_prefix = "wan-"
    _output = VideoPipelineOutput
    _output_type = "np"
    _keywords = ("num_frames", "guidance_scale_2")


class WanImageToVideoPipeline(_Pipeline):
    """Wan 2.1 image to video (diffusers' WanImageToVideoPipeline): ``image`` (a PIL image or a picture path)
    is the clip's first frame, and for a first-last-frame model ``last_image`` its last; both go through
    the folder's VAE at the video's size and, for models that read them, its CLIP image encoder. UniPC,
    guidance and Wan 2.2's two experts as WanPipeline. Latents (B, 16, F', H/8, W/8)."""

    _pipeline_classes = ("WanImageToVideoPipeline",)
    _output = VideoPipelineOutput
    _output_type = "np"
    _keywords = ("image", "last_image", "num_frames", "guidance_scale_2")
    _images = {"image": "first_image", "last_image": "last_image"}

    @classmethod
    def from_preset(cls, name):
        """There are no image-to-video presets: load a pipeline folder with from_pretrained."""
        raise ValueError(f"{cls.__name__} has no presets ({name!r}); load a pipeline folder with from_pretrained")


class SkyReelsV2ImageToVideoPipeline(WanImageToVideoPipeline):
    """SkyReels-V2 image to video (diffusers' SkyReelsV2ImageToVideoPipeline): WanImageToVideoPipeline's
    loop on a SkyReels-V2 network, ``image`` (and ``last_image``) as there; guidance default 5.0."""

    _pipeline_classes = ("SkyReelsV2ImageToVideoPipeline",)
    _keywords = ("image", "last_image", "num_frames")


class SkyReelsV2DiffusionForcingPipeline(_Pipeline):
    """SkyReels-V2 diffusion forcing (diffusers' SkyReelsV2DiffusionForcingPipeline): blocks of latent
    frames ``ar_step`` steps apart, ``fps`` for the fps embedding; guidance as Wan (default 6.0). A long
    video (``overlap_history`` set) runs in chunks of ``base_num_frames`` frames, each later one starting
    from the last ``overlap_history`` frames so far, fed with noise at ``addnoise_condition``."""

    _pipeline_classes = ("SkyReelsV2DiffusionForcingPipeline",)
    _preset_prefix = "skyreels-"
    _output = VideoPipelineOutput
    _output_type = "np"
    _keywords = ("num_frames", "ar_step", "fps", "base_num_frames", "overlap_history", "addnoise_condition")


class LTXPipeline(_Pipeline):
    """LTX-Video text to video (diffusers' LTXPipeline): flow-match Euler with the video's dynamic shift,
    classifier-free guidance ``guidance_scale`` (default 3.0) on the negative prompt (default "") or
    ``negative_prompt_embeds``; given embeddings come with their T5 masks ``prompt_attention_mask`` and
    ``negative_prompt_attention_mask`` (int64 0/1, as encode_prompt returns them). ``frame_rate``
    (default 25) scales the RoPE's time; the VAE decodes at ``decode_timestep`` (default 0) with noise
    mixed in at ``decode_noise_scale``, drawn from ``generator_seed``. ``latents``: packed (B, tokens, C)
    as diffusers takes them; output_type "latent" returns the final latents packed the same way."""

    _pipeline_classes = ("LTXPipeline",)
    _preset_prefix = "ltx-"
    _output = VideoPipelineOutput
    _keywords = ("num_frames", "frame_rate", "prompt_attention_mask", "negative_prompt_attention_mask",
                 "decode_timestep", "decode_noise_scale")
    _latents = staticmethod(_packed_tokens)
