"""Writes tests/data/fixtures/t5_relative_buckets.json: transformers' T5 relative-position buckets
(bidirectional, 32 buckets, max distance 128: T5 v1.1 and UMT5) for relative positions -600..600.
The log-spaced buckets come from a float32 log truncated to an integer, so positions on a bucket
boundary (16, 32, 64) are where a port can round differently; the table holds every one of them.

    /work/venv/bin/python tools/reference/t5_relative_buckets.py   # torch 2.15, transformers 5.24
"""
import json
import pathlib

import torch
import transformers
from transformers.models.t5.modeling_t5 import T5Attention

positions = torch.arange(-600, 601)
buckets = T5Attention._relative_position_bucket(positions, bidirectional=True, num_buckets=32, max_distance=128)
out = pathlib.Path(__file__).resolve().parents[2] / "tests/data/fixtures/t5_relative_buckets.json"
out.write_text(json.dumps({
    "made_by": f"tools/reference/t5_relative_buckets.py, transformers {transformers.__version__}, "
               f"torch {torch.__version__}",
    "num_buckets": 32,
    "max_distance": 128,
    "relative_positions": positions.tolist(),
    "buckets": buckets.tolist(),
}) + "\n")
print("wrote", out)
