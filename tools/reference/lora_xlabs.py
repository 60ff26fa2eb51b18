"""Reference for XLabs' FLUX.1 LoRA layout (`double_blocks.N.processor.qkv_lora1.down.weight`, `.up.weight`,
no alpha), which diffusers' load_lora_weights converts (`_convert_xlabs_flux_lora_to_diffusers`) and the
lora_flux_tiny fixture does not hold. lora1 of that fixture (its PEFT file) is written in XLabs' names for
the layers XLabs adapts — each double block's image and text attention (qkv_lora1/2: to_q, to_k, to_v and
add_q/k/v_proj; proj_lora1/2: to_out.0, to_add_out) and each single block's attention (qkv_lora: to_q,
to_k, to_v; proj_lora: proj_out) — exactly: a fused qkv's down is the three A's stacked, its up the three
B's block-diagonal, and PEFT's alpha/r (2) folded into up, as XLabs files carry no alpha.

Then, from the files on disk, on lora_flux_tiny's pipeline and call (float32, one thread):
- `xlabs_latents`: diffusers with load_lora_weights(the XLabs file) — the truth the test compares with;
- `peft_subset_latents`: diffusers with the PEFT file restricted to the same layers, which the XLabs file
  must equal (the conversion proven: printed, and stored as `max_abs_diff_to_peft_subset` in run_log.json).

Writes tests/data/fixtures/lora_xlabs/: xlabs_lora.safetensors, expected.safetensors, run_log.json.

    /work/refvenv/bin/pip install torch diffusers==0.42.1 transformers safetensors peft
    python tools/reference/lora_xlabs.py   # torch 2.15.0, diffusers 0.42.1, peft 0.21.2
"""
import json
import pathlib

import torch
from diffusers import FluxPipeline
from safetensors.torch import load_file, save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = ROOT / "tests/data/fixtures/lora_flux_tiny"
OUT = ROOT / "tests/data/fixtures/lora_xlabs"


def xlabs_file(peft):
    """lora1's PEFT tensors (transformer.<module>.lora_A/B.weight, scaling 2) in XLabs' names."""
    scale = 2.0  # lora_alpha 8 / r 4

    def a(module):
        return peft[f"transformer.{module}.lora_A.weight"]

    def b(module):
        return peft[f"transformer.{module}.lora_B.weight"]

    def fused(modules):
        down = torch.cat([a(m) for m in modules], 0)
        up = torch.block_diag(*[b(m) for m in modules]) * scale
        return down, up

    out, used = {}, []
    blocks = sorted({int(k.split(".")[2]) for k in peft if k.startswith("transformer.transformer_blocks.")})
    singles = sorted({int(k.split(".")[2]) for k in peft if k.startswith("transformer.single_transformer_blocks.")})
    for i in blocks:
        p = f"transformer_blocks.{i}.attn."
        for stem, modules in (("qkv_lora1", ["to_q", "to_k", "to_v"]),
                              ("qkv_lora2", ["add_q_proj", "add_k_proj", "add_v_proj"]),
                              ("proj_lora1", ["to_out.0"]), ("proj_lora2", ["to_add_out"])):
            names = [p + m for m in modules]
            down, up = fused(names) if len(names) > 1 else (a(names[0]), b(names[0]) * scale)
            out[f"double_blocks.{i}.processor.{stem}.down.weight"] = down.contiguous()
            out[f"double_blocks.{i}.processor.{stem}.up.weight"] = up.contiguous()
            used += names
    for i in singles:
        p = f"single_transformer_blocks.{i}."
        names = [p + "attn.to_q", p + "attn.to_k", p + "attn.to_v"]
        down, up = fused(names)
        out[f"single_blocks.{i}.processor.qkv_lora.down.weight"] = down.contiguous()
        out[f"single_blocks.{i}.processor.qkv_lora.up.weight"] = up.contiguous()
        out[f"single_blocks.{i}.processor.proj_lora.down.weight"] = a(p + "proj_out").contiguous()
        out[f"single_blocks.{i}.processor.proj_lora.up.weight"] = (b(p + "proj_out") * scale).contiguous()
        used += names + [p + "proj_out"]
    return out, used


def run(pipe, inputs, call):
    with torch.no_grad():
        return pipe(prompt_embeds=inputs["prompt_embeds"], pooled_prompt_embeds=inputs["pooled_prompt_embeds"],
                    latents=inputs["latents"], height=call["height"], width=call["width"],
                    num_inference_steps=call["num_inference_steps"], guidance_scale=call["guidance_scale"],
                    output_type="latent").images


def main():
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    peft_path = BASE / "lora1/pytorch_lora_weights.safetensors"
    peft = load_file(peft_path)
    xlabs, used = xlabs_file(peft)
    save_file(xlabs, OUT / "xlabs_lora.safetensors")
    subset = {k: v for k, v in peft.items() if k.split(".lora_")[0][len("transformer."):] in used}
    save_file(subset, OUT / "peft_subset.safetensors")

    inputs = load_file(BASE / "inputs.safetensors")
    call = json.loads((BASE / "call.json").read_text())
    pipe = FluxPipeline.from_pretrained(BASE / "pipeline", torch_dtype=torch.float32, text_encoder=None,
                                        tokenizer=None, text_encoder_2=None, tokenizer_2=None)
    pipe.load_lora_weights(OUT / "xlabs_lora.safetensors", adapter_name="xlabs")
    xlabs_latents = run(pipe, inputs, call)
    pipe.unload_lora_weights()
    # The PEFT subset carries lora_alpha 8 / r 4 in no metadata: give it through the adapter config.
    pipe.load_lora_weights(OUT / "peft_subset.safetensors", adapter_name="subset")
    pipe.set_adapters(["subset"], [2.0])  # alpha/r of the subset's unrecorded config (scale 1 without it)
    subset_latents = run(pipe, inputs, call)
    pipe.unload_lora_weights()
    base_latents = run(pipe, inputs, call)
    (OUT / "peft_subset.safetensors").unlink()

    save_file({"xlabs_latents": xlabs_latents.contiguous()}, OUT / "expected.safetensors")
    log = {
        "torch": torch.__version__,
        "diffusers": __import__("diffusers").__version__,
        "peft": __import__("peft").__version__,
        "xlabs_modules": len(xlabs) // 2,
        "layers": len(used),
        "max_abs_diff_to_peft_subset": float((xlabs_latents - subset_latents).abs().max()),
        "max_abs_diff_to_base": float((xlabs_latents - base_latents).abs().max()),
    }
    (OUT / "run_log.json").write_text(json.dumps(log, indent=1) + "\n")
    print(json.dumps(log, indent=1))


if __name__ == "__main__":
    main()
