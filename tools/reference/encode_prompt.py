"""Reference embeddings for `cpdit encode-prompt`: diffusers' own FluxPipeline.encode_prompt and
WanPipeline.encode_prompt on tiny random text encoders with the repository's tokenizer fixtures.

Writes tests/data/fixtures/encode_prompt/:
  flux_text_encoder/   CLIPTextModel (vocab 49408 for the real CLIP tokenizer, hidden 16, 2 layers), stored
                       in bf16 (half the bytes of its large table, and the bf16 loading path is exercised);
                       the reference runs in float32 on exactly those bf16 values
  flux_text_encoder_2/ T5EncoderModel (vocab 416 = spiece's 316 + 100 extra ids, d_model 16, 2 layers)
  wan_text_encoder/    UMT5EncoderModel (same widths as the T5)
  expected.safetensors flux/{prompt_embeds, pooled_prompt_embeds, negative_prompt_embeds,
                       negative_pooled_prompt_embeds}, wan/{prompt_embeds, negative_prompt_embeds}
  cases.json           the prompts and max_sequence_length
A test assembles each pipeline folder from these encoders, tokenizer_clip_v2 and tokenizer_t5_v2.

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/encode_prompt.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib

import diffusers
import torch
import transformers
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer, T5Config, T5EncoderModel, T5TokenizerFast
from transformers import UMT5Config, UMT5EncoderModel

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/data/fixtures"
OUT = FIXTURES / "encode_prompt"
PROMPT = "A cinematic shot of a red fox in the snow, golden hour, 35mm, bokeh"
NEGATIVE = "  blurry,   low quality\n"
MAX_SEQUENCE_LENGTH = 32


def reinitialise(model, seed):
    """Every parameter random at a scale that keeps activations O(1), as the fixtures' README rule."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "embed" in name or "relative_attention_bias" in name:
                p.copy_(0.5 * noise)
            elif p.dim() >= 2:
                p.copy_(noise / p.shape[1] ** 0.5)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * noise)
            else:
                p.copy_(0.1 * noise)
    return model.eval()


def round_to_bf16(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.bfloat16().float())
    return model


def save(model, folder, dtype=torch.float32):
    model.to(dtype).save_pretrained(OUT / folder, safe_serialization=True)
    model.to(torch.float32)


def main():
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    t5_widths = dict(vocab_size=416, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=4,
                     feed_forward_proj="gated-gelu", dropout_rate=0.0)
    clip = reinitialise(CLIPTextModel(CLIPTextConfig(
        vocab_size=49408, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=77, hidden_act="quick_gelu", bos_token_id=49406, eos_token_id=2)), 1)
    round_to_bf16(clip)
    t5 = reinitialise(T5EncoderModel(T5Config(**t5_widths)), 2)
    umt5 = reinitialise(UMT5EncoderModel(UMT5Config(**t5_widths)), 3)
    save(clip, "flux_text_encoder", torch.bfloat16)
    save(t5, "flux_text_encoder_2")
    save(umt5, "wan_text_encoder")

    clip_tokenizer = CLIPTokenizer.from_pretrained(FIXTURES / "tokenizer_clip_v2")
    t5_tokenizer = T5TokenizerFast.from_pretrained(FIXTURES / "tokenizer_t5_v2")
    expected = {}
    with torch.no_grad():
        flux = diffusers.FluxPipeline(scheduler=None, vae=None, text_encoder=clip, tokenizer=clip_tokenizer,
                                      text_encoder_2=t5, tokenizer_2=t5_tokenizer, transformer=None)
        for prefix, text in (("", PROMPT), ("negative_", NEGATIVE)):
            embeds, pooled, _ = flux.encode_prompt(prompt=text, prompt_2=None, max_sequence_length=MAX_SEQUENCE_LENGTH)
            expected[f"flux/{prefix}prompt_embeds"] = embeds
            expected[f"flux/{prefix}pooled_prompt_embeds"] = pooled
        wan = diffusers.WanPipeline(tokenizer=t5_tokenizer, text_encoder=umt5, vae=None, scheduler=None,
                                    transformer=None)
        embeds, negative = wan.encode_prompt(prompt=PROMPT, negative_prompt=NEGATIVE, do_classifier_free_guidance=True,
                                             max_sequence_length=MAX_SEQUENCE_LENGTH)
        expected["wan/prompt_embeds"] = embeds
        expected["wan/negative_prompt_embeds"] = negative
    save_file({k: v.contiguous().float() for k, v in expected.items()}, OUT / "expected.safetensors")
    (OUT / "cases.json").write_text(json.dumps({
        "made_by": f"tools/reference/encode_prompt.py, diffusers {diffusers.__version__}, "
                   f"transformers {transformers.__version__}, torch {torch.__version__}",
        "prompt": PROMPT, "negative_prompt": NEGATIVE, "max_sequence_length": MAX_SEQUENCE_LENGTH,
    }, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
