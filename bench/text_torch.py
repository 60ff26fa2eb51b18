#!/usr/bin/env python3
"""transformers' text encoders side by side with `cpdit bench text` (a benchmark, not a test).

Builds --model at its released widths with --layers blocks and random weights in --dtype (bfloat16 by
default, as the Hub checkpoints are stored): t5-xxl-shaped is T5EncoderModel at T5-v1.1-XXL's (d_model
4096, 64 heads x 64, gated-GELU FFN 10240, vocab 32128), qwen2.5-vl-7b-shaped Qwen2.5-VL-7B's language
model (Qwen2_5_VLTextModel: hidden 3584, 28 heads x 128 over 4 key/value heads, SwiGLU 18944, vocab
152064). Times its forward on --tokens tokens with --threads threads (min and median wall time of
--repeats runs after a warm-up, and the least process CPU time), then runs `cpdit bench text` on the
same shape and thread count and prints one JSON line with both GFLOP/s, both weight byte counts and the
ratio cpdit / torch.

  python3 bench/text_torch.py [--model t5-xxl-shaped] [--tokens 512] [--layers 2] [--threads 1]
"""
import argparse
import json
import os
import subprocess

import torch
import transformers
from transformers import T5Config, T5EncoderModel
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLTextConfig
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLTextModel

from attention_torch import time_min_median  # this folder's timing rule: warm-up, min, median, CPU time


def shaped(name, layers, tokens):
    """The model's config and class, and its GFLOP as cpdit counts them: 2 FLOP per multiply-add of the
    projections and the feed-forward per token, and of q.k and p.v over all token pairs per head."""
    if name == "t5-xxl-shaped":
        config = T5Config(vocab_size=32128, d_model=4096, d_kv=64, d_ff=10240, num_layers=layers, num_heads=64,
                          feed_forward_proj="gated-gelu", dropout_rate=0.0)
        inner = config.num_heads * config.d_kv
        per_token = 2.0 * (4 * config.d_model * inner + 3.0 * config.d_model * config.d_ff)
        return config, T5EncoderModel, layers * (tokens * per_token + 4.0 * tokens * tokens * inner) / 1e9
    config = Qwen2_5_VLTextConfig(vocab_size=152064, hidden_size=3584, intermediate_size=18944,
                                  num_hidden_layers=layers, num_attention_heads=28, num_key_value_heads=4,
                                  rms_norm_eps=1e-6, rope_theta=1e6, attn_implementation="sdpa")
    d, kv = 3584, 4 * 128
    per_token = 2.0 * (2 * d * d + 2 * d * kv + 3.0 * d * 18944)
    return config, Qwen2_5_VLTextModel, layers * (tokens * per_token + 4.0 * tokens * tokens * d) / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["t5-xxl-shaped", "qwen2.5-vl-7b-shaped"], default="t5-xxl-shaped")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--cpdit", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "cpdit"))
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config, model_class, work = shaped(args.model, args.layers, args.tokens)
    dtype = getattr(torch, args.dtype)
    torch.set_default_dtype(dtype)  # built in the target dtype: no float32 copy first
    model = model_class(config).eval()
    torch.set_default_dtype(torch.float32)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    ids = (torch.arange(args.tokens) * 7919 % config.vocab_size).unsqueeze(0)
    with torch.inference_mode():
        t_min, t_median, cpu = time_min_median(lambda: model(input_ids=ids), args.repeats)

    cpdit = json.loads(subprocess.run(
        [args.cpdit, "bench", "text", "--model", args.model, "--tokens", str(args.tokens), "--layers", str(args.layers),
         "--threads", str(args.threads), "--repeats", str(args.repeats)],
        check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
    print(json.dumps({
        "bench": "text_torch", "model": args.model, "tokens": args.tokens, "layers": args.layers, "threads": args.threads,
        "torch": torch.__version__, "transformers": transformers.__version__, "torch_dtype": args.dtype,
        "torch_min_s": t_min, "torch_median_s": t_median, "torch_cpu_min_s": cpu,
        "torch_gflops": work / t_min, "torch_gflops_per_cpu_s": work / cpu, "torch_weight_bytes": weight_bytes,
        "cpdit_min_s": cpdit["min_s"], "cpdit_median_s": cpdit["median_s"], "cpdit_cpu_min_s": cpdit["cpu_min_s"],
        "cpdit_gflops": cpdit["gflops"], "cpdit_gflops_per_cpu_s": cpdit["gflops_per_cpu_s"],
        "cpdit_weight_bytes": cpdit["weight_bytes"], "cpdit_rss_after_load_bytes": cpdit["rss_after_load_bytes"],
        "ratio_cpdit_over_torch_wall": t_min / cpdit["min_s"],
        "ratio_cpdit_over_torch_cpu": cpu / cpdit["cpu_min_s"],
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "unset"),
    }), flush=True)


if __name__ == "__main__":
    main()
