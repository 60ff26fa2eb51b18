"""A Q8_0 GGUF transformer for the LoRA-on-a-quantised-base check: lora_flux_tiny's transformer weights in
diffusers' names, every 2-D weight whose rows are whole 32-blocks as Q8_0 (gguf.quantize), the rest F32.

Writes tests/data/fixtures/lora_gguf_base/:
  transformer-Q8_0.gguf
  expected.safetensors: `base_latents` and `lora1_latents` — FluxPipeline on lora_flux_tiny's call with the
  GGUF's dequantised weights (gguf.dequantize) loaded into its transformer, without and with
  load_lora_weights(lora1's PEFT file): the quantised base's own runs, computed by diffusers.
  run_log.json: each one's max |difference| from lora_flux_tiny's dense runs (base_latents,
  lora1_scale1.0_latents): the quantisation error of the base alone and with the adapter.

    /work/refvenv/bin/pip install torch diffusers==0.42.1 safetensors peft gguf
    python tools/reference/lora_gguf_base.py   # gguf 0.19.0, torch 2.15.0, diffusers 0.42.1
"""
import json
import pathlib

import gguf
import torch
from diffusers import FluxPipeline
from safetensors.torch import load_file, save_file

from lora_xlabs import run  # the fixture's call on a pipeline (tools/reference/ is the script's folder)

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = ROOT / "tests/data/fixtures/lora_flux_tiny"
OUT = ROOT / "tests/data/fixtures/lora_gguf_base"
Q8_0 = gguf.GGMLQuantizationType.Q8_0


def main():
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    weights = load_file(BASE / "pipeline/transformer/diffusion_pytorch_model.safetensors")
    writer = gguf.GGUFWriter(str(OUT / "transformer-Q8_0.gguf"), "flux")
    dequantised = {}
    for name, tensor in weights.items():
        values = tensor.float().numpy()
        if values.ndim == 2 and values.shape[1] % 32 == 0:
            blocks = gguf.quantize(values, Q8_0)
            writer.add_tensor(name, blocks, raw_dtype=Q8_0)
            dequantised[name] = torch.from_numpy(gguf.dequantize(blocks, Q8_0).reshape(values.shape).copy())
        else:
            writer.add_tensor(name, values)
            dequantised[name] = tensor.float()
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    inputs = load_file(BASE / "inputs.safetensors")
    call = json.loads((BASE / "call.json").read_text())
    pipe = FluxPipeline.from_pretrained(BASE / "pipeline", torch_dtype=torch.float32, text_encoder=None,
                                        tokenizer=None, text_encoder_2=None, tokenizer_2=None)
    pipe.transformer.load_state_dict(dequantised)
    base = run(pipe, inputs, call)
    pipe.load_lora_weights(BASE / "lora1/pytorch_lora_weights.safetensors", adapter_name="lora1")
    lora = run(pipe, inputs, call)
    save_file({"base_latents": base.contiguous(), "lora1_latents": lora.contiguous()}, OUT / "expected.safetensors")
    dense = load_file(BASE / "expected.safetensors")
    log = {
        "torch": torch.__version__,
        "diffusers": __import__("diffusers").__version__,
        "gguf_q8_0_tensors": sum(1 for n, t in weights.items() if t.ndim == 2 and t.shape[1] % 32 == 0),
        "base_quantisation_error": float((base - dense["base_latents"]).abs().max()),
        "lora1_quantisation_error": float((lora - dense["lora1_scale1.0_latents"]).abs().max()),
    }
    (OUT / "run_log.json").write_text(json.dumps(log, indent=1) + "\n")
    print(json.dumps(log, indent=1))


if __name__ == "__main__":
    main()
