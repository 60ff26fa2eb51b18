"""The same call as diffusers' pipelines, on the same tiny pipeline folders, gives diffusers' final
latents and pixels: the fixtures are diffusers' outputs (tools/reference/flux_pipeline.py,
flux_img2img_pipeline.py, wan_pipeline.py, wan_i2v_pipeline.py, wan22_experts_pipeline.py,
qwenimage_pipeline.py, skyreels_df_pipeline.py and ltx_pipeline.py, diffusers from PyPI) for these
embeddings, images and initial latents."""

import numpy as np
from PIL import Image

import cpdit
from conftest import FIXTURES, pack_latents, pack_tokens, read_safetensors

# diffusers' float32 run and the engine's differ only in summation order over 3 steps of a 2-block
# model: the observed gap is 1e-5 on latents of magnitude 5; 1e-4 is ten times that (the C++ parity
# tests, tests/pipeline/test_pipeline_parity.cpp, hold the command line to the same).
LATENTS_TOLERANCE = 1e-4
# The pixels in [0, 1]: the latents' 1e-5 through the VAE's unscaling (x2.8 for FLUX.1, Wan's
# latents_std) and a decoder of gain about 1, then halved; observed 4e-6. 2e-4 is the latents' 1e-4
# through the same path (x2.8, halved: 1.4e-4) rounded up.
PIXELS_TOLERANCE = 2e-4


def test_flux_pipeline_matches_diffusers():
    case = FIXTURES / "flux_pipeline_tiny"
    inputs, expected = read_safetensors(case / "inputs.safetensors"), read_safetensors(case / "expected.safetensors")
    pipe = cpdit.FluxPipeline.from_pretrained(case / "pipeline")
    call = dict(prompt_embeds=inputs["prompt_embeds"], pooled_prompt_embeds=inputs["pooled_prompt_embeds"],
                latents=inputs["latents"], height=32, width=32, num_inference_steps=3, guidance_scale=3.5)
    latents = pipe(**call, output_type="latent").images
    np.testing.assert_allclose(latents, pack_latents(expected["latents"]), rtol=0, atol=LATENTS_TOLERANCE)
    image = pipe(**call, output_type="np").images
    np.testing.assert_allclose(image, expected["image"], rtol=0, atol=PIXELS_TOLERANCE)
    # FluxPipeline's true CFG: the negative embeddings at true_cfg_scale 2.5.
    guided = pipe(**call, negative_prompt_embeds=inputs["negative_prompt_embeds"],
                  negative_pooled_prompt_embeds=inputs["negative_pooled_prompt_embeds"], true_cfg_scale=2.5,
                  output_type="latent").images
    np.testing.assert_allclose(guided, pack_latents(expected["latents_true_cfg"]), rtol=0, atol=LATENTS_TOLERANCE)


def test_wan_pipeline_matches_diffusers():
    case = FIXTURES / "wan_pipeline_tiny"
    inputs, expected = read_safetensors(case / "inputs.safetensors"), read_safetensors(case / "expected.safetensors")
    pipe = cpdit.WanPipeline.from_pretrained(case / "pipeline")
    call = dict(prompt_embeds=inputs["prompt_embeds"], negative_prompt_embeds=inputs["negative_prompt_embeds"],
                latents=inputs["latents"], height=48, width=32, num_frames=5, num_inference_steps=3,
                guidance_scale=5.0)
    latents = pipe(**call, output_type="latent").frames
    np.testing.assert_allclose(latents, expected["latents"], rtol=0, atol=LATENTS_TOLERANCE)
    frames = pipe(**call, output_type="np").frames
    np.testing.assert_allclose(frames, expected["video"], rtol=0, atol=PIXELS_TOLERANCE)


def test_wan_and_skyreels_image_to_video_match_diffusers():
    root = FIXTURES / "wan_i2v_pipeline"
    inputs = read_safetensors(root / "inputs.safetensors")
    first = Image.open(root / "first.png")
    # I2V from a PIL image; first-last-frame from PNG paths, as diffusers takes either kind of image input.
    for name, images, pipeline in (
            ("first", dict(image=first), cpdit.WanImageToVideoPipeline),
            ("first_last", dict(image=root / "first.png", last_image=root / "last.png"), cpdit.WanImageToVideoPipeline),
            ("skyreels_first", dict(image=first), cpdit.SkyReelsV2ImageToVideoPipeline)):
        pipe = pipeline.from_pretrained(root / name / "pipeline")
        latents = pipe(**images, prompt_embeds=inputs["prompt_embeds"],
                       negative_prompt_embeds=inputs["negative_prompt_embeds"], latents=inputs["latents"], height=48,
                       width=32, num_frames=9, num_inference_steps=3, output_type="latent").frames
        want = read_safetensors(root / name / "expected.safetensors")["latents"]
        np.testing.assert_allclose(latents, want, rtol=0, atol=LATENTS_TOLERANCE, err_msg=name)


def test_img2img_matches_diffusers():
    # diffusers' start (its two random draws made) given as latents=, as diffusers takes them: the image
    # decides the schedule through strength; loaded from the text-to-image folders, as diffusers allows.
    image = Image.open(FIXTURES / "flux_img2img" / "image.png")
    for name, pipeline, folder, unpacked in (
            ("flux_img2img", cpdit.FluxImg2ImgPipeline, "flux_pipeline_tiny", lambda x: x),
            ("qwenimage_img2img", cpdit.QwenImageImg2ImgPipeline, "qwenimage_pipeline_tiny", lambda x: x[:, :, 0])):
        inputs = read_safetensors(FIXTURES / name / "inputs.safetensors")
        want = read_safetensors(FIXTURES / name / "expected.safetensors")
        pipe = pipeline.from_pretrained(FIXTURES / folder / "pipeline")
        guidance = {"guidance_scale": 3.5} if name == "flux_img2img" else {}  # the fixture's (the default is 7.0)
        latents = pipe(image=image, **inputs, **guidance, latents=want["initial_latents"], height=32, width=32,
                       num_inference_steps=5, strength=0.6, output_type="latent").images
        want_packed = pack_latents(unpacked(want["latents"]))
        np.testing.assert_allclose(latents, want_packed, rtol=0, atol=LATENTS_TOLERANCE, err_msg=name)


def test_wan22_two_experts_match_diffusers():
    root = FIXTURES / "wan22_experts"
    inputs = read_safetensors(root / "inputs.safetensors")
    call = dict(prompt_embeds=inputs["prompt_embeds"], negative_prompt_embeds=inputs["negative_prompt_embeds"],
                latents=inputs["latents"], height=48, width=32, num_frames=9, num_inference_steps=4, guidance_scale=4.0,
                guidance_scale_2=3.0, output_type="latent")
    for name, pipeline, image in (("t2v", cpdit.WanPipeline, {}),
                                  ("i2v", cpdit.WanImageToVideoPipeline,
                                   {"image": FIXTURES / "wan_i2v_pipeline" / "first.png"})):
        latents = pipeline.from_pretrained(root / name / "pipeline")(**image, **call).frames
        want = read_safetensors(root / name / "expected.safetensors")["latents"]
        np.testing.assert_allclose(latents, want, rtol=0, atol=LATENTS_TOLERANCE, err_msg=name)


def test_qwenimage_pipeline_matches_diffusers():
    case = FIXTURES / "qwenimage_pipeline_tiny"
    inputs, expected = read_safetensors(case / "inputs.safetensors"), read_safetensors(case / "expected.safetensors")
    pipe = cpdit.QwenImagePipeline.from_pretrained(case / "pipeline")
    # QwenImagePipeline's default true_cfg_scale 4.0 on the negative pair, with its padded prompt masks.
    latents = pipe(**{name: inputs[name] for name in inputs}, height=32, width=32, num_inference_steps=3,
                   output_type="latent").images
    want = pack_latents(expected["latents"][:, :, 0])  # (B, C, 1, H, W): one frame
    np.testing.assert_allclose(latents, want, rtol=0, atol=LATENTS_TOLERANCE)


def test_qwenimage_pipeline_from_a_prompt_matches_diffusers():
    case = FIXTURES / "qwenimage_prompt_tiny"
    expected = read_safetensors(case / "expected.safetensors")
    pipe = cpdit.QwenImagePipeline.from_pretrained(case / "pipeline")
    # run1: the prompt and its negative through the folder's Qwen2.5-VL, true CFG 4.0 (diffusers' call.json).
    latents = pipe(prompt="一只可爱的猫坐在窗台上，阳光洒在它的毛上。", negative_prompt="blurry, low quality",
                   true_cfg_scale=4.0, height=48, width=64, num_inference_steps=3, max_sequence_length=512,
                   latents=expected["run1.latents_in"], output_type="latent").images
    np.testing.assert_allclose(latents, expected["run1.final_latents"], rtol=0, atol=LATENTS_TOLERANCE)


def test_skyreels_diffusion_forcing_matches_diffusers():
    case = FIXTURES / "skyreels_df_tiny"
    inputs, expected = read_safetensors(case / "inputs.safetensors"), read_safetensors(case / "expected.safetensors")
    pipe = cpdit.SkyReelsV2DiffusionForcingPipeline.from_pretrained(case / "pipeline")
    # 6 latent frames in blocks of 2, each block one step behind the one before, at the pipeline's
    # default guidance 6.0 on the negative embeddings and fps 24.
    latents = pipe(prompt_embeds=inputs["prompt_embeds"], negative_prompt_embeds=inputs["negative_prompt_embeds"],
                   latents=inputs["latents"], height=48, width=32, num_frames=21, num_inference_steps=3, ar_step=1,
                   output_type="latent").frames
    np.testing.assert_allclose(latents, expected["latents"], rtol=0, atol=LATENTS_TOLERANCE)


def test_ltx_pipeline_matches_diffusers():
    case = FIXTURES / "ltx_pipeline_tiny"
    inputs, expected = read_safetensors(case / "inputs.safetensors"), read_safetensors(case / "expected.safetensors")
    pipe = cpdit.LTXPipeline.from_pretrained(case / "pipeline")
    # LTXPipeline's default guidance 3.0 on the negative embeddings, both with their padded T5 masks, at
    # 25 frames per second; the video decoded at the default decode_timestep 0.
    call = dict(prompt_embeds=inputs["prompt_embeds"], prompt_attention_mask=inputs["prompt_attention_mask"],
                negative_prompt_embeds=inputs["negative_prompt_embeds"],
                negative_prompt_attention_mask=inputs["negative_prompt_attention_mask"], latents=inputs["latents"],
                height=64, width=64, num_frames=9, num_inference_steps=3, frame_rate=25)
    latents = pipe(**call, output_type="latent").frames
    np.testing.assert_allclose(latents, pack_tokens(expected["latents"]), rtol=0, atol=LATENTS_TOLERANCE)
    frames = pipe(**call, output_type="np").frames
    np.testing.assert_allclose(frames, expected["video"], rtol=0, atol=PIXELS_TOLERANCE)
