"""Arrays handed to the engine: numpy as they are where the layout allows, torch through DLPack."""

import numpy as np


def engine_array(x, name, dtype=np.float32):
    """``x`` as a C-contiguous numpy array of ``dtype`` for the engine to read in place.

    A C-contiguous numpy array of that dtype is returned as it is (the engine reads its memory, no
    copy); a CPU torch tensor is viewed through DLPack (no copy either when its layout allows); anything
    else is copied once into the layout the engine needs.
    """
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__dlpack__"):
            try:
                x = np.from_dlpack(x)
            except (BufferError, TypeError, RuntimeError):
                # e.g. bfloat16, which numpy has no type for, or a tensor that needs grad
                x = np.asarray(x.detach().float().cpu()) if hasattr(x, "detach") else np.asarray(x)
        else:
            x = np.asarray(x)
    if x.dtype != dtype:
        if dtype == np.bool_:  # no guessing which numbers mean True
            raise ValueError(f"{name}: expected a bool array, got {x.dtype.name}")
        x = x.astype(dtype)
    return np.ascontiguousarray(x)


def like_input(result, x):
    """``result`` (numpy) as a torch tensor (through DLPack, not copied) when ``x`` is one."""
    if not type(x).__module__.startswith("torch"):
        return result
    import torch  # the input was a torch tensor, so torch is importable

    return torch.from_dlpack(result)
