"""Under `mpirun -np N python script.py` the MPI processes are the ranks: rank 0 gets the result, the
others None, as the command line writes only on rank 0."""

import os

import numpy as np

import cpdit
from conftest import FIXTURES, mpirun_python, read_safetensors

MPI_SCRIPT = """
import cpdit, numpy as np, os, sys
sys.path.insert(0, {tests!r})
from conftest import FIXTURES, read_safetensors
inputs = read_safetensors(FIXTURES / "flux_pipeline_tiny" / "inputs.safetensors")
pipe = cpdit.FluxPipeline.from_pretrained(FIXTURES / "flux_pipeline_tiny" / "pipeline")
pipe.transformer.enable_parallelism(cpdit.ContextParallelConfig(ring_degree=2))
out = pipe(prompt_embeds=inputs["prompt_embeds"], pooled_prompt_embeds=inputs["pooled_prompt_embeds"],
           latents=inputs["latents"], height=32, width=32, num_inference_steps=3, output_type="latent", threads=1)
# One file per rank: the ranks' stdout lines reach mpirun's pipe interleaved.
with open(os.path.join({folder!r}, "rank" + os.environ["OMPI_COMM_WORLD_RANK"]), "w") as f:
    f.write("None" if out is None else "result")
if out is not None:
    np.save({path!r}, out.images)
"""


def test_mpirun_rank_zero_gets_the_result(tmp_path):
    path = tmp_path / "latents.npy"
    run = mpirun_python(MPI_SCRIPT.format(tests=os.path.dirname(__file__), path=str(path), folder=str(tmp_path)))
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "rank0").read_text() == "result"
    assert (tmp_path / "rank1").read_text() == "None"
    inputs = read_safetensors(FIXTURES / "flux_pipeline_tiny" / "inputs.safetensors")
    local = cpdit.FluxPipeline.from_pretrained(FIXTURES / "flux_pipeline_tiny" / "pipeline")
    local.transformer.enable_parallelism(cpdit.ContextParallelConfig(ring_degree=2))
    want = local(prompt_embeds=inputs["prompt_embeds"], pooled_prompt_embeds=inputs["pooled_prompt_embeds"],
                 latents=inputs["latents"], height=32, width=32, num_inference_steps=3, output_type="latent",
                 threads=1).images
    # Two MPI processes and two local ranks run the same split with the same arithmetic: bit for bit.
    np.testing.assert_array_equal(np.load(path), want)
