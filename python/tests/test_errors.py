"""Errors reach Python as exceptions carrying the engine's one-line message: cpdit's invalid-argument
errors as ValueError, other failures (here a truncated checkpoint, a format error) as RuntimeError;
the package's own argument checks (those `cpdit generate` makes as it parses its flags) raise ValueError
before any work, and a keyword the pipeline does not take TypeError, as in any Python call."""

import math
import shutil

import pytest

import cpdit
from conftest import FIXTURES, read_safetensors

CASE = FIXTURES / "flux_pipeline_tiny"


def test_a_folder_of_another_pipeline_is_refused():
    with pytest.raises(ValueError, match="holds a WanPipeline, not a FluxPipeline"):
        cpdit.FluxPipeline.from_pretrained(FIXTURES / "wan_pipeline_tiny" / "pipeline")
    with pytest.raises(ValueError, match="does not exist"):
        cpdit.WanPipeline.from_pretrained(FIXTURES / "no_such_pipeline")
    with pytest.raises(ValueError, match=r"runs the wan-\* presets, not 'flux-tiny'"):
        cpdit.WanPipeline.from_preset("flux-tiny")


def test_a_prompt_without_text_encoders_raises_the_engines_message():
    pipe = cpdit.FluxPipeline.from_pretrained(CASE / "pipeline")  # saved without tokenizers or text encoders
    # The engine names the keywords of the call, not the flags of the command line.
    with pytest.raises(ValueError, match=r"^prompt= needs the pipeline's text encoders: .* has no tokenizer/ .*"
                                         r"\(give prompt_embeds= instead\)$"):
        pipe("a red fox", height=32, width=32, num_inference_steps=1, output_type="latent")


def test_arguments_the_package_checks():
    pipe = cpdit.FluxPipeline.from_pretrained(CASE / "pipeline")
    embeds = read_safetensors(CASE / "inputs.safetensors")["prompt_embeds"]
    with pytest.raises(ValueError, match="give prompt or prompt_embeds, not both"):
        pipe("a red fox", prompt_embeds=embeds)
    with pytest.raises(ValueError, match="output_type must be 'pil', 'np' or 'latent', got 'pt'"):
        pipe(prompt_embeds=embeds, output_type="pt")
    with pytest.raises(TypeError, match="unexpected keyword argument .ar_step."):
        cpdit.WanPipeline.from_preset("wan-tiny")(ar_step=1)


def test_image_to_video_images_are_checked():
    pipe = cpdit.WanImageToVideoPipeline.from_pretrained(FIXTURES / "wan_i2v_pipeline" / "first" / "pipeline")
    embeds = read_safetensors(FIXTURES / "wan_i2v_pipeline" / "inputs.safetensors")["prompt_embeds"]
    call = dict(prompt_embeds=embeds, height=48, width=32, num_frames=9, num_inference_steps=1, output_type="latent")
    with pytest.raises(ValueError, match="give the clip's first frame with image=$"):
        pipe(**call)
    with pytest.raises(ValueError, match="image must be a PIL image or a PNG, JPEG or WebP path, got ndarray"):
        pipe(image=embeds, **call)
    with pytest.raises(ValueError, match="has no presets"):
        cpdit.WanImageToVideoPipeline.from_preset("wan-tiny")


# Values the command line refuses as it parses its flags, and which the engine would otherwise take as
# "not given" (0, NaN), take silently (a negative count) or fail on later (an infinite scale).
@pytest.mark.parametrize("keyword,value,message", [
    ("num_inference_steps", 0, "num_inference_steps must be a whole number >= 1, got 0"),
    ("height", -32, "height must be a whole number >= 1, got -32"),
    ("height", 32.5, "height must be a whole number, got 32.5"),
    ("width", "32", "width must be a whole number, got '32'"),
    ("guidance_scale", math.nan, "guidance_scale must be a finite number, got nan"),
    ("true_cfg_scale", math.inf, "true_cfg_scale must be a finite number, got inf"),
    ("generator_seed", -1, "generator_seed must be a whole number >= 0, got -1"),
    ("generator_seed", 2**64, f"generator_seed {2**64} is too large"),
    ("max_sequence_length", True, "max_sequence_length must be a whole number, got True"),
    ("ranks", 0, "ranks must be a whole number >= 1, got 0"),
    ("threads", -1, "threads must be a whole number >= 1, got -1"),
    ("negative_prompt", 7, "negative_prompt must be a string, got 7"),
])
def test_values_the_command_line_refuses_raise_value_error(keyword, value, message):
    pipe = cpdit.FluxPipeline.from_pretrained(CASE / "pipeline")
    embeds = read_safetensors(CASE / "inputs.safetensors")["prompt_embeds"]
    with pytest.raises(ValueError) as error:
        pipe(prompt_embeds=embeds, **{keyword: value})
    assert str(error.value) == message


def test_context_parallel_degrees_must_be_whole_numbers():
    with pytest.raises(ValueError, match=r"^ring_degree must be a whole number, got 2.5$"):
        cpdit.ContextParallelConfig(ring_degree=2.5)
    with pytest.raises(ValueError, match=r"^rotate_method must be a string, got 3$"):
        cpdit.ContextParallelConfig(rotate_method=3)


def test_a_truncated_checkpoint_raises_runtime_error(tmp_path):
    folder = tmp_path / "pipeline"
    shutil.copytree(CASE / "pipeline", folder)
    weights = folder / "transformer" / "diffusion_pytorch_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    inputs = read_safetensors(CASE / "inputs.safetensors")
    pipe = cpdit.FluxPipeline.from_pretrained(folder)
    with pytest.raises(RuntimeError) as error:
        pipe(prompt_embeds=inputs["prompt_embeds"], pooled_prompt_embeds=inputs["pooled_prompt_embeds"], height=32,
             width=32, num_inference_steps=1, output_type="latent")
    assert "diffusion_pytorch_model.safetensors" in str(error.value) and "\n" not in str(error.value)


# The engine names what it refuses by the flags of `cpdit generate`; a pipeline's call reads them as its
# own keywords (cpdit/_keywords.py).
@pytest.mark.parametrize("pipeline,preset,options,message", [
    (cpdit.WanPipeline, "wan-tiny", dict(guidance_scale_2=2.0, num_frames=5),
     r"^guidance_scale_2= is for Wan 2.2's low-noise expert \(a pipeline folder with transformer_2/\); preset "
     r"wan-tiny has one transformer$"),
    (cpdit.FluxPipeline, "flux-tiny", dict(height=2**20, width=2**20),
     r"^this run needs at least .* of memory is available; lower height=/width=/num_frames=$"),
])
def test_engine_errors_name_the_calls_keywords(pipeline, preset, options, message):
    pipe = pipeline.from_preset(preset)
    call = dict(height=32, width=32, num_inference_steps=2, output_type="latent", threads=1)
    with pytest.raises(ValueError, match=message):
        pipe(**dict(call, **options))


def test_an_image_to_video_error_names_image_keywords():
    folder = FIXTURES / "wan_i2v_pipeline"
    pipe = cpdit.WanImageToVideoPipeline.from_pretrained(folder / "first" / "pipeline")
    embeds = read_safetensors(folder / "inputs.safetensors")["prompt_embeds"]
    with pytest.raises(ValueError, match=r" conditions on one image's CLIP tokens: last_image= needs a first-last-frame "
                                         r"model$"):
        pipe(image=folder / "first.png", last_image=folder / "last.png", prompt_embeds=embeds, height=48, width=32,
             num_frames=9, num_inference_steps=1, output_type="latent")


def test_a_flag_beside_its_keyword_is_named_once():
    from cpdit._keywords import keyword_message

    assert keyword_message("give the prompt's embeddings (--embeddings, prompt_embeds=)") == \
        "give the prompt's embeddings (prompt_embeds=)"
    assert keyword_message("raise --strength or --steps; --preview stays") == \
        "raise strength= or num_inference_steps=; --preview stays"  # a flag without a keyword stays
    assert keyword_message("--cfg-parallel 3 must be 1 or 2") == "cfg_degree=3 must be 1 or 2"


def test_text_with_a_lone_surrogate_is_refused_naming_it():
    pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
    for call in (dict(prompt="a fox\ud800"), dict(prompt="fox", negative_prompt="a\udc00b", true_cfg_scale=2.0)):
        with pytest.raises(ValueError, match="is not valid text: it holds the lone surrogate"):
            pipe(num_inference_steps=1, height=32, width=32, **call)


def test_a_degree_past_the_engines_int_is_refused_in_words():
    with pytest.raises(ValueError, match=r"ring_degree must be at most 2147483647, got 1099511627776"):
        cpdit.ContextParallelConfig(ring_degree=2**40)
