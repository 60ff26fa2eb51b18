"""Arguments checked as `cpdit generate` checks its flags (apps/cpdit/option_checks.hpp), since a value
handed to the engine directly skips those: there, 0 and NaN mean "not given", and a negative count or
an infinite scale would be taken or fail later with a less clear message."""

import math
import numbers

__all__ = ["checked"]


def checked(name, value, kind):
    """``value`` of keyword ``name`` as the engine's field takes it, or ValueError saying what ``name``
    takes: ``kind`` ``str``, a string; ``bool``, True or False; ``float``, a finite number; ``int``, a whole number; a number,
    a whole number from it."""
    if kind is str:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string, got {value!r}")
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # True is no count or scale
        raise ValueError(f"{name} must be a {'finite' if kind is float else 'whole'} number, got {value!r}")
    if kind is float:
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        return float(value)
    if not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if kind is not int and value < kind:
        raise ValueError(f"{name} must be a whole number >= {kind}, got {value!r}")
    return int(value)
