"""diffusers' progress bar: a tqdm bar over each generation's steps on stderr, set by
set_progress_bar_config (disable=True: nothing printed); no bar without tqdm installed."""

import sys

import pytest

import cpdit

CALL = dict(height=32, width=32, num_inference_steps=3, max_sequence_length=8, threads=1, output_type="latent")


def test_a_bar_counts_the_steps(capsys):
    pytest.importorskip("tqdm")  # optional: scripts/test.sh installs it
    pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
    pipe.set_progress_bar_config(desc="denoise", ascii=True)
    pipe(**CALL)
    err = capsys.readouterr().err
    assert "denoise" in err and "3/3" in err and "4/3" not in err, err


def test_a_disabled_bar_prints_nothing(capfd):
    pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
    pipe.set_progress_bar_config(disable=True)
    pipe(**CALL)
    assert capfd.readouterr() == ("", "")  # neither Python's streams nor the engine's


def test_without_tqdm_there_is_no_bar(capfd, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import tqdm.auto then raises ImportError
    cpdit.FluxPipeline.from_preset("flux-tiny")(**CALL)
    assert capfd.readouterr() == ("", "")
