"""diffusers' LoRA methods on the fixtures diffusers made with them (tests/data/fixtures/lora_flux_tiny,
lora_wan_tiny): load_lora_weights in any layout, set_adapters with weights and stacked, fuse_lora at a
scale and unfuse_lora, disable/enable, unload_lora_weights back to the base; a bad name or file is a
ValueError or RuntimeError in one line."""

import json

import numpy as np
import pytest

import cpdit
from conftest import FIXTURES, read_safetensors

# diffusers' float32 run against the engine's: summation order (and, for fuse_lora, the delta added
# into W before the product rather than after it): measured at most 3.7e-6 (FLUX.1) and 9.7e-6 (Wan)
# on latents of magnitude ~3 to 5.
LATENTS_TOLERANCE = 2e-5


def flux_case():
    case = FIXTURES / "lora_flux_tiny"
    inputs = read_safetensors(case / "inputs.safetensors")
    call = dict(prompt_embeds=inputs["prompt_embeds"], pooled_prompt_embeds=inputs["pooled_prompt_embeds"],
                latents=inputs["latents"], height=16, width=24, num_inference_steps=3, output_type="latent")
    return case, cpdit.FluxPipeline.from_pretrained(case / "pipeline"), call, read_safetensors(case / "expected.safetensors")


def test_flux_adapters_as_diffusers_sets_them():
    case, pipe, call, expected = flux_case()

    def check(key):
        np.testing.assert_allclose(pipe(**call).images, expected[key], rtol=0, atol=LATENTS_TOLERANCE, err_msg=key)

    check("base_latents")
    pipe.load_lora_weights(case / "lora1", adapter_name="lora1")  # the folder's pytorch_lora_weights.safetensors
    assert pipe.get_active_adapters() == ["lora1"]
    check("lora1_scale1.0_latents")
    pipe.set_adapters(["lora1"], [0.7])
    check("lora1_weight0.7_latents")
    pipe.load_lora_weights(case / "lora2" / "kohya_sd_scripts.safetensors", adapter_name="lora2")
    assert pipe.get_active_adapters() == ["lora2"]  # loading makes the new adapter the active one
    check("lora2_scale1.0_latents")
    pipe.set_adapters(["lora1", "lora2"], adapter_weights=[0.8, 0.5])
    check("lora1x0.8_lora2x0.5_latents")
    assert pipe.get_list_adapters() == {"transformer": ["lora1", "lora2"]}
    pipe.disable_lora()
    check("base_latents")
    pipe.enable_lora()
    pipe.set_adapters("lora1")
    pipe.fuse_lora(components=["transformer"], lora_scale=0.6, adapter_names=["lora1"])
    check("lora1_fused0.6_latents")
    pipe.unfuse_lora()
    check("lora1_scale1.0_latents")  # unfused: lora1 active again at its weight, as diffusers' layers are
    pipe.set_adapters(["lora1"], [0.7])
    pipe.fuse_lora(lora_scale=1.0)  # the active adapter at its weight, merged
    check("lora1_weight0.7_latents")
    pipe.unfuse_lora()
    pipe.unload_lora_weights()
    assert pipe.get_list_adapters() == {"transformer": []}
    check("base_latents")


def test_wan_adapter_in_the_original_layout():
    case = FIXTURES / "lora_wan_tiny"
    inputs, expected = read_safetensors(case / "inputs.safetensors"), read_safetensors(case / "expected.safetensors")
    pipe = cpdit.WanPipeline.from_pretrained(case / "pipeline")
    pipe.load_lora_weights(case / "lora1" / "wan_diffusion_model_lora_A.safetensors")  # adapter default_0
    assert pipe.get_active_adapters() == ["default_0"]
    frames = pipe(prompt_embeds=inputs["prompt_embeds"], negative_prompt_embeds=inputs["negative_prompt_embeds"],
                  latents=inputs["latents"], height=32, width=32, num_frames=5, num_inference_steps=3,
                  output_type="latent").frames
    np.testing.assert_allclose(frames, expected["lora1_scale1.0_latents"], rtol=0, atol=LATENTS_TOLERANCE)


def test_bad_names_and_files_are_refused(tmp_path):
    case, pipe, call, _ = flux_case()
    pipe.load_lora_weights(case / "lora1", adapter_name="a")
    with pytest.raises(ValueError, match="adapter name 'a' is already in use"):
        pipe.load_lora_weights(case / "lora2", adapter_name="a")
    with pytest.raises(ValueError, match="adapter 'b' is not loaded"):
        pipe.set_adapters(["b"])
    with pytest.raises(ValueError, match="2 adapter names but 1 adapter_weights"):
        pipe.set_adapters(["a", "a"], [1.0])
    with pytest.raises(ValueError, match="adapter_weights must be finite numbers"):
        pipe.set_adapters(["a"], [float("nan")])
    with pytest.raises(ValueError, match="is not a file"):
        pipe.load_lora_weights(tmp_path / "none.safetensors")
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.raises(RuntimeError, match="broken.safetensors"):
        pipe.load_lora_weights(broken, adapter_name="broken")
    # Wan's adapter on FLUX.1: refused at the call, naming what matched nothing.
    pipe.load_lora_weights(FIXTURES / "lora_wan_tiny" / "lora1", adapter_name="wan")
    with pytest.raises(ValueError, match="name no layer of") as error:
        pipe(**call)
    assert "\n" not in str(error.value)


def write_safetensors(path, tensors):
    """float32 arrays as a safetensors file (the header, then the data in order)."""
    header, data = {}, b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array, np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)


def test_wan22_low_noise_expert_takes_load_into_transformer_2(tmp_path):
    root = FIXTURES / "wan22_experts"
    inputs = read_safetensors(root / "inputs.safetensors")
    call = dict(prompt_embeds=inputs["prompt_embeds"], negative_prompt_embeds=inputs["negative_prompt_embeds"],
                latents=inputs["latents"], height=48, width=32, num_frames=9, num_inference_steps=4,
                output_type="latent")
    generator = np.random.default_rng(0)
    lora = tmp_path / "expert.safetensors"
    write_safetensors(lora, {"transformer.blocks.0.attn1.to_q.lora_A.weight": generator.uniform(-0.5, 0.5, (4, 24)),
                             "transformer.blocks.0.attn1.to_q.lora_B.weight": generator.uniform(-0.5, 0.5, (24, 4))})
    pipe = cpdit.WanPipeline.from_pretrained(root / "t2v" / "pipeline")
    base = pipe(**call).frames
    pipe.load_lora_weights(lora, adapter_name="high")
    high = pipe(**call).frames
    pipe.unload_lora_weights()
    pipe.load_lora_weights(lora, adapter_name="low", load_into_transformer_2=True)
    low = pipe(**call).frames
    assert np.abs(high - base).max() > 1e-3 and np.abs(low - base).max() > 1e-3 and np.abs(high - low).max() > 1e-3
    pipe.set_adapters(["low"], [0.0])
    np.testing.assert_array_equal(pipe(**call).frames, base)
