"""Makes tests/data/fixtures/attention_rules/: attention under causal and block-causal masks, computed
by PyTorch in float64 from dense (S, S) masks built the way diffusers' SkyReels-V2 builds its
diffusion-forcing mask (each token's frame, frames grouped num_frame_per_block at a time, a token
attends to every token of its own and earlier frame blocks).

Run once with the project's venv (/work/venv/bin/python tools/reference/attention_rules.py); the
outputs are committed and CI never runs this script.
"""
import json
import math
import pathlib

import torch
from safetensors.torch import save_file

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "fixtures" / "attention_rules"


def frame_block_mask(frames, tokens_per_frame, num_frame_per_block):
    # frame index of every token (frame-major layout), then its block of frames
    frame_of_token = torch.arange(frames).repeat_interleave(tokens_per_frame)
    block_of_token = frame_of_token // num_frame_per_block
    return block_of_token[None, :] <= block_of_token[:, None]  # [i, j]: query i may attend key j


def causal_mask(seq):
    return torch.ones(seq, seq, dtype=torch.bool).tril()


def reference(q, k, v, keep, dtype):
    """out (B,S,H,D) and natural-log lse (B,H,S) computed in dtype; keep is bool (B,1,S,S), true = attend."""
    qd, kd, vd = (t.to(dtype).transpose(1, 2) for t in (q, k, v))  # (B,H,S,D)
    scale = 1.0 / math.sqrt(q.shape[-1])
    out = torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, attn_mask=keep, scale=scale)
    logits = (qd @ kd.transpose(-1, -2)) * scale
    lse = torch.logsumexp(logits.masked_fill(~keep, -math.inf), dim=-1)
    return out.transpose(1, 2).contiguous(), lse.contiguous()


def write(name, q, k, v, rule_mask, key_mask, meta):
    keep = rule_mask[None, None].expand(q.shape[0], 1, -1, -1).clone()
    if key_mask is not None:
        keep &= key_mask[:, None, None, :]
    out64, lse64 = reference(q, k, v, keep, torch.float64)
    out, lse = reference(q, k, v, keep, torch.float32)
    tensors = {"q": q, "k": k, "v": v, "out": out, "lse": lse, "out_f64": out64, "lse_f64": lse64}
    if key_mask is not None:
        tensors["key_mask"] = key_mask
    save_file(tensors, str(OUT / name), metadata={k: str(x) for k, x in meta.items()})
    print(name, json.dumps(meta))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(20261130)

    # Causal over 100 tokens.
    B, S, H, D = 2, 100, 4, 32
    q, k, v = (torch.randn(B, S, H, D) for _ in range(3))
    write("attention_rules_b2_s100_h4_d32_causal.safetensors", q, k, v, causal_mask(S), None,
          {"mask_rule": "causal", "tokens_per_block": 1})

    # Block-causal as SkyReels-V2 with num_frame_per_block 2: 8 latent frames of 3 x 4 tokens, so
    # blocks of 24 tokens; batch 1 pads its keys after 61 tokens.
    frames, per_frame, per_block = 8, 12, 2
    S = frames * per_frame
    q, k, v = (torch.randn(B, S, H, D) for _ in range(3))
    key_mask = torch.arange(S)[None, :] < torch.tensor([S, 61])[:, None]
    write("attention_rules_b2_s96_h4_d32_blockcausal_keymask.safetensors", q, k, v,
          frame_block_mask(frames, per_frame, per_block), key_mask,
          {"mask_rule": "block-causal", "tokens_per_block": per_frame * per_block,
           "frames": frames, "tokens_per_frame": per_frame, "num_frame_per_block": per_block})


if __name__ == "__main__":
    main()
