"""cpdit.attention.dispatch on numpy arrays: diffusers' dispatcher layout, results against a float64
reference, masks, and inputs read in place (not copied) where the layout allows."""

import numpy as np
import pytest

import cpdit
from cpdit import _cpdit
from cpdit._arrays import engine_array

# float32 attention over 40 keys of head dim 16 against float64: each output is a weighted mean of
# values of magnitude ~1 with weights from an f32 softmax, so rounding stays near 1e-6; 2e-5 leaves room
# for the flash kernel's blocked exp and rescaling, no more.
TOLERANCE = 2e-5


def reference(q, k, v, keep=None):
    """Softmax attention in float64, (B, S, H, D) layouts; keep: bool (B, S_k)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    if keep is not None:
        scores = np.where(keep[:, None, None, :], scores, -np.inf)
    lse = np.log(np.exp(scores - scores.max(-1, keepdims=True)).sum(-1)) + scores.max(-1)
    return np.einsum("bhqk,bkhd->bqhd", np.exp(scores - lse[..., None]), v), lse


def inputs(seed=0, b=2, s=40, h=3, d=16):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((b, s, h, d), dtype=np.float32) for _ in range(3)]


@pytest.mark.parametrize("backend", ["flash", "native"])
def test_dispatch_matches_float64_reference(backend):
    q, k, v = inputs()
    out, lse = cpdit.attention.dispatch(q, k, v, backend=backend, return_lse=True)
    want, want_lse = reference(q, k, v)
    assert out.dtype == np.float32 and out.shape == q.shape and lse.shape == (2, 3, 40)
    np.testing.assert_allclose(out, want, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(lse, want_lse, rtol=0, atol=TOLERANCE)


def test_key_padding_mask():
    q, k, v = inputs(1)
    keep = np.ones((2, 40), dtype=bool)
    keep[1, 25:] = False
    out = cpdit.attention.dispatch(q, k, v, mask=keep)
    np.testing.assert_allclose(out, reference(q, k, v, keep)[0], rtol=0, atol=TOLERANCE)


def test_contiguous_float32_inputs_are_read_in_place():
    q, k, v = inputs(2)
    for x in (q, k, v):
        assert engine_array(x, "x") is x  # the package hands the array itself to the engine
        assert _cpdit.borrowed_address(x) == x.ctypes.data  # and the engine reads that memory
    before = [x.copy() for x in (q, k, v)]
    cpdit.attention.dispatch(q, k, v)
    for x, old in zip((q, k, v), before):
        np.testing.assert_array_equal(x, old)  # read, never written


def test_other_layouts_are_copied_once_and_give_the_same_result():
    q, k, v = inputs(3)
    strided = np.asfortranarray(q)
    copied = engine_array(strided, "q")
    assert copied.ctypes.data != strided.ctypes.data and copied.flags.c_contiguous
    np.testing.assert_array_equal(cpdit.attention.dispatch(strided, k, v), cpdit.attention.dispatch(q, k, v))
    doubles = cpdit.attention.dispatch(q.astype(np.float64), k, v)
    np.testing.assert_array_equal(doubles, cpdit.attention.dispatch(q, k, v))


class DLPackOnly:
    """An array that offers only the DLPack protocol, as a torch CPU tensor does."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_inputs_are_read_in_place():
    q, k, v = inputs(4)
    viewed = engine_array(DLPackOnly(q), "q")
    assert viewed.ctypes.data == q.ctypes.data
    out = cpdit.attention.dispatch(DLPackOnly(q), DLPackOnly(k), DLPackOnly(v))
    np.testing.assert_array_equal(out, cpdit.attention.dispatch(q, k, v))


def test_bad_shapes_raise_value_error():
    q, k, v = inputs(5)
    with pytest.raises(ValueError):
        cpdit.attention.dispatch(q, k[:, :, :2], v)
    with pytest.raises(ValueError, match="unknown attention backend 'sdpa'"):
        cpdit.attention.dispatch(q, k, v, backend="sdpa")
    with pytest.raises(ValueError, match=r"^mask "):
        cpdit.attention.dispatch(q, k, v, mask=np.ones((2, 3, 40), dtype=bool))


def test_a_given_scale_is_used_or_refused_never_replaced():
    q, k, v = inputs(6)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="softmax scale must be positive and finite"):
            cpdit.attention.dispatch(q, k, v, scale=bad)
    default = cpdit.attention.dispatch(q, k, v)
    np.testing.assert_array_equal(cpdit.attention.dispatch(q, k, v, scale=1 / np.sqrt(q.shape[-1])), default)
    assert not np.array_equal(cpdit.attention.dispatch(q, k, v, scale=0.5), default)


def test_an_empty_batch_gives_empty_outputs_on_every_backend():
    q, k, v = inputs(7)
    for backend in cpdit.attention.backends():
        out, lse = cpdit.attention.dispatch(q[:0], k[:0], v[:0], backend=backend, return_lse=True)
        assert out.shape == (0, *q.shape[1:]) and lse.shape == (0, q.shape[2], q.shape[1])
