#!/usr/bin/env bash
# README command 1: installs, builds, and runs the main job on the embedded default — a prompt to a
# PNG through FLUX.1 at full width (preset flux-mini: 3072 hidden, 24 heads, 2 double + 4 single
# blocks, with its built-in tokenizers, one-layer CLIP and T5 and a small VAE, all seeded random
# weights): encode, a few denoising steps at a modest size split over one local rank per core, and
# the VAE decode split over the same ranks; then the same on one rank with one thread. Prints each
# stage's time, the largest difference between the two outputs (latents and image) and the speedup.
# Extra arguments go to both runs (e.g. --steps 2 --height 128 --width 128 --prompt "a lighthouse").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh

out=${CPDIT_RUN_DIR:-build/run}
mkdir -p "$out"
cores=$(nproc)
common=(--preset flux-mini --prompt "a red fox in the snow" --steps 4 --height 256 --width 256 --text-tokens 256
        --seed 7 "$@")

echo "== ${cores} local ranks, one compute thread each =="
build/bin/cpdit generate "${common[@]}" --ranks "$cores" --threads 1 \
  --out "$out/parallel.safetensors" --image "$out/parallel.png" --json | tee "$out/parallel.json"
echo "== 1 rank, one compute thread =="
build/bin/cpdit generate "${common[@]}" --ranks 1 --threads 1 \
  --out "$out/single.safetensors" --json | tee "$out/single.json"

echo "== ${cores} ranks against 1 rank =="
build/bin/cpdit diff "$out/parallel.safetensors" "$out/single.safetensors"
python3 - "$out/parallel.json" "$out/single.json" <<'PY'
import json, sys
p, s = (json.load(open(f)) for f in sys.argv[1:3])
print(f"configuration  ring {p['ring']} x ulysses {p['ulysses']} ({p['rotate']}) on {p['ranks']} ranks")
print(f"time per step  {p['seconds_per_step']:.2f} s on {p['ranks']} ranks, {s['seconds_per_step']:.2f} s on 1 rank")
print(f"speedup        {s['seconds_per_step'] / p['seconds_per_step']:.2f}x (denoising steps)")
for run in (p, s):
    stages = ", ".join(f"{st['name']} {st['seconds']:.2f} s" for st in run['stages'])
    print(f"stages         {stages} on {run['ranks']} rank(s)")
print(f"image          {p.get('image', '-')}")
PY
