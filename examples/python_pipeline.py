"""cpdit from Python, as diffusers spells it: a pipeline, context parallelism on its transformer, a call.

    pip install .                                   # from the repository root (after scripts/build.sh)
    python examples/python_pipeline.py              # 4 local ranks: ring 2 x Ulysses 2
    python examples/python_pipeline.py --preset flux-tiny --size 64   # seconds, not minutes
    python examples/python_pipeline.py --model /path/to/FLUX.1-dev --prompt "a red fox in the snow"
    mpirun -np 4 python examples/python_pipeline.py # 4 MPI processes; rank 0 saves the image

Without --model it runs a built-in preset, flux-mini by default (seeded random weights: the image is noise-like,
but every stage runs the real code).
"""

import argparse
import time

import cpdit


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a diffusers FluxPipeline folder (default: --preset)")
    parser.add_argument("--preset", default="flux-mini", help="a built-in FLUX.1 preset: flux-mini or flux-tiny")
    parser.add_argument("--prompt", default="a red fox in the snow")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--size", type=int, default=256, help="height and width in pixels")
    parser.add_argument("--ring", type=int, default=2)
    parser.add_argument("--ulysses", type=int, default=2)
    parser.add_argument("--out", default="fox.png")
    args = parser.parse_args()

    pipe = cpdit.FluxPipeline.from_pretrained(args.model) if args.model else cpdit.FluxPipeline.from_preset(args.preset)
    pipe.transformer.enable_parallelism(
        cpdit.ContextParallelConfig(ring_degree=args.ring, ulysses_degree=args.ulysses, rotate_method="p2p"))
    pipe.transformer.set_attention_backend("flash")
    start = time.monotonic()
    out = pipe(args.prompt, height=args.size, width=args.size, num_inference_steps=args.steps, generator_seed=0)
    if out is None:  # an MPI process other than rank 0
        return
    out.images[0].save(args.out)
    print(f"wrote {args.out} in {time.monotonic() - start:.1f} s")


if __name__ == "__main__":
    main()
