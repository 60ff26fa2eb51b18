"""A pipeline keeps its models between calls: the second call opens no file; a list of prompts and
num_images_per_prompt run one request each on the same pipeline, as separate calls would; a call
cancelled by Ctrl-C on one MPI process stops both processes after the same step, and the next call on
the same pipelines runs."""

import numpy as np

import cpdit
from cpdit import _cpdit
from conftest import FIXTURES, mpirun_python

FLUX = FIXTURES / "flux_pipeline_tiny"
CALL = dict(height=32, width=32, num_inference_steps=2, max_sequence_length=8, threads=1, output_type="latent",
            random_embeddings=True)  # the fixture folder has no text encoders


def test_a_second_call_opens_nothing():
    pipe = cpdit.FluxPipeline.from_pretrained(FLUX / "pipeline")
    before = _cpdit.models_opened()
    first = pipe(**CALL).images
    opened = _cpdit.models_opened() - before
    assert opened == 2  # transformer/ and vae/ (this folder has no text encoders), once
    second = pipe(generator_seed=5, **CALL).images
    assert _cpdit.models_opened() - before == opened
    assert np.abs(first - second).max() > 1e-3  # another seed, another result
    # Another dtype is another pipeline: opened again.
    pipe(dtype="bf16", **CALL)
    assert _cpdit.models_opened() - before == 2 * opened


def test_a_list_of_prompts_and_images_per_prompt_are_separate_calls():
    pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
    batch = pipe(["a red fox", "a blue whale"], num_images_per_prompt=2, generator_seed=3, **CALL).images
    assert batch.shape[0] == 4
    for index, (prompt, image) in enumerate([("a red fox", 0), ("a red fox", 1), ("a blue whale", 0),
                                             ("a blue whale", 1)]):
        single = pipe(prompt, generator_seed=3 + image, **CALL).images
        np.testing.assert_array_equal(batch[index : index + 1], single)
    pil = pipe(["a red fox", "a grey owl"], **dict(CALL, output_type="pil")).images
    assert len(pil) == 2 and pil[0].size == (32, 32)


def test_a_bad_prompt_list_is_refused_naming_it():
    pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
    for prompt in ([], ["a", 3], 7):
        try:
            pipe(prompt, **CALL)
        except ValueError as error:
            assert "prompt must be a string or a non-empty list of strings" in str(error)
        else:
            raise AssertionError(f"{prompt!r} was accepted")


# Rank 1 sends itself SIGINT once the long call runs; both processes must leave it after the same step
# (KeyboardInterrupt on both), then run a short call on the same pipeline objects.
MPI_CANCEL = """
import os, signal, sys, threading, time, cpdit, numpy as np
rank = os.environ["OMPI_COMM_WORLD_RANK"]
pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
pipe.transformer.enable_parallelism(cpdit.ContextParallelConfig(ring_degree=2))
if rank == "1":
    threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGINT)).start()
start = time.monotonic()
outcome = "finished"
try:
    pipe(height=64, width=64, num_inference_steps=100000, output_type="latent", threads=1)
except KeyboardInterrupt:
    outcome = "interrupted"
seconds = time.monotonic() - start
out = pipe(height=32, width=32, num_inference_steps=2, output_type="latent", threads=1)
with open(os.path.join({folder!r}, "rank" + rank), "w") as f:
    f.write(outcome + " " + ("None" if out is None else str(out.images.shape)))
if out is not None:
    np.save({path!r}, out.images)
"""


def test_ctrl_c_on_one_mpi_process_cancels_both_and_the_pipeline_runs_again(tmp_path):
    path = tmp_path / "latents.npy"
    run = mpirun_python(MPI_CANCEL.format(path=str(path), folder=str(tmp_path)), timeout=180)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "rank0").read_text() == "interrupted (1, 4, 64)"  # 32x32: 4x4 latents, packed 2x2
    assert (tmp_path / "rank1").read_text() == "interrupted None"
    fresh = cpdit.FluxPipeline.from_preset("flux-tiny")
    fresh.transformer.enable_parallelism(cpdit.ContextParallelConfig(ring_degree=2))
    want = fresh(height=32, width=32, num_inference_steps=2, output_type="latent", threads=1).images
    np.testing.assert_array_equal(np.load(path), want)
