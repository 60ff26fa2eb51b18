"""The FLUX.1, Wan, SkyReels-V2 and LTX-Video pipeline fixtures through the Python API equal `cpdit generate` on the
same inputs bit for bit: both run the same generate job, one rank and one thread each, so not even the
summation order differs."""

import subprocess

import numpy as np

import cpdit
from conftest import FIXTURES, pack_latents, pack_tokens, read_safetensors


def run_cli(binary, case, out, extra, text="--embeddings"):
    """`cpdit generate` on the case's folder and initial latents, its prompt from the case's embeddings
    (or with text="--prompt", from the prompt in `extra`)."""
    inputs = FIXTURES / case / "inputs.safetensors"
    embeddings = ["--embeddings", str(inputs)] if text == "--embeddings" else []
    subprocess.run(
        [str(binary), "generate", "--model", str(FIXTURES / case / "pipeline"), *embeddings, "--latents", str(inputs),
         "--ranks", "1", "--threads", "1", "--out", str(out), "--json", *extra],
        check=True, capture_output=True)
    return read_safetensors(out)


def test_flux_pipeline_equals_cli(cpdit_binary, tmp_path):
    cli = run_cli(cpdit_binary, "flux_pipeline_tiny", tmp_path / "out.safetensors",
                  ["--steps", "3", "--height", "32", "--width", "32", "--guidance", "3.5"])
    inputs = read_safetensors(FIXTURES / "flux_pipeline_tiny" / "inputs.safetensors")
    pipe = cpdit.FluxPipeline.from_pretrained(FIXTURES / "flux_pipeline_tiny" / "pipeline")
    call = dict(prompt_embeds=inputs["prompt_embeds"], pooled_prompt_embeds=inputs["pooled_prompt_embeds"],
                latents=inputs["latents"], height=32, width=32, num_inference_steps=3, guidance_scale=3.5, threads=1)
    image = pipe(**call, output_type="np").images
    latents = pipe(**call, output_type="latent").images
    np.testing.assert_array_equal(image, cli["image"])
    np.testing.assert_array_equal(latents, pack_latents(cli["latents"]))
    pil = pipe(**call).images  # the default output_type, "pil": diffusers' rounding of the same pixels
    np.testing.assert_array_equal(np.asarray(pil[0]), (cli["image"][0] * 255).round().astype(np.uint8))


def test_wan_pipeline_equals_cli(cpdit_binary, tmp_path):
    cli = run_cli(cpdit_binary, "wan_pipeline_tiny", tmp_path / "out.safetensors",
                  ["--steps", "3", "--frames", "5", "--height", "48", "--width", "32", "--guidance", "5"])
    inputs = read_safetensors(FIXTURES / "wan_pipeline_tiny" / "inputs.safetensors")
    pipe = cpdit.WanPipeline.from_pretrained(FIXTURES / "wan_pipeline_tiny" / "pipeline")
    call = dict(prompt_embeds=inputs["prompt_embeds"], negative_prompt_embeds=inputs["negative_prompt_embeds"],
                latents=inputs["latents"], height=48, width=32, num_frames=5, num_inference_steps=3,
                guidance_scale=5.0, threads=1)
    frames = pipe(**call).frames  # WanPipeline's default output_type is "np"
    latents = pipe(**call, output_type="latent").frames
    np.testing.assert_array_equal(frames, cli["video"])
    np.testing.assert_array_equal(latents, cli["latents"])


def test_skyreels_long_video_equals_cli(cpdit_binary, tmp_path):
    # 37 frames in chunks of 21 overlapping by 9, the overlap fed with noise at timestep 20: the long
    # video's keywords, from seeded noise (the engine's on both sides).
    long_video = ["--base-num-frames", "21", "--overlap-history", "9", "--addnoise-condition", "20"]
    inputs = FIXTURES / "skyreels_df_long" / "inputs.safetensors"
    subprocess.run(
        [str(cpdit_binary), "generate", "--model", str(FIXTURES / "skyreels_df_tiny" / "pipeline"), "--embeddings",
         str(inputs), "--steps", "2", "--frames", "37", "--height", "48", "--width", "32", "--ar-step", "1", "--seed",
         "3", *long_video, "--ranks", "1", "--threads", "1", "--out", str(tmp_path / "out.safetensors"), "--json"],
        check=True, capture_output=True)
    cli = read_safetensors(tmp_path / "out.safetensors")
    embeddings = read_safetensors(inputs)
    pipe = cpdit.SkyReelsV2DiffusionForcingPipeline.from_pretrained(FIXTURES / "skyreels_df_tiny" / "pipeline")
    latents = pipe(**embeddings, height=48, width=32, num_frames=37, num_inference_steps=2, ar_step=1, generator_seed=3,
                   base_num_frames=21, overlap_history=9, addnoise_condition=20, threads=1,
                   output_type="latent").frames
    assert latents.shape == (1, 4, 10, 6, 4)  # every latent frame of the 37, not one chunk's
    np.testing.assert_array_equal(latents, cli["latents"])


def test_ltx_pipeline_equals_cli(cpdit_binary, tmp_path):
    prompt = "a red fox trotting through snow"
    size = ["--steps", "3", "--frames", "9", "--height", "64", "--width", "64", "--text-tokens", "24"]
    inputs = read_safetensors(FIXTURES / "ltx_pipeline_tiny" / "inputs.safetensors")
    pipe = cpdit.LTXPipeline.from_pretrained(FIXTURES / "ltx_pipeline_tiny" / "pipeline")
    # From the prompt, through the folder's T5 tokenizer and encoder on both sides.
    call = dict(latents=inputs["latents"], height=64, width=64, num_frames=9, num_inference_steps=3,
                max_sequence_length=24, threads=1)
    cli = run_cli(cpdit_binary, "ltx_pipeline_tiny", tmp_path / "out.safetensors", ["--prompt", prompt, *size],
                  text="--prompt")
    np.testing.assert_array_equal(pipe(prompt, **call, output_type="np").frames, cli["video"])
    np.testing.assert_array_equal(pipe(prompt, **call, output_type="latent").frames, pack_tokens(cli["latents"]))
    # LTXPipeline's own keywords: the frame rate, and the decode timestep with noise (drawn from the seed).
    cli = run_cli(cpdit_binary, "ltx_pipeline_tiny", tmp_path / "decode_t.safetensors",
                  ["--prompt", prompt, *size, "--fps", "12", "--decode-timestep", "0.05", "--decode-noise-scale",
                   "0.025", "--seed", "7"], text="--prompt")
    frames = pipe(prompt, **call, frame_rate=12, decode_timestep=0.05, decode_noise_scale=0.025, generator_seed=7,
                  output_type="np").frames
    np.testing.assert_array_equal(frames, cli["video"])
