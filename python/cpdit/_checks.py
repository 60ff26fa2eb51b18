"""Arguments checked as `cpdit generate` checks its flags (apps/cpdit/option_checks.hpp), since a value
handed to the engine directly skips those: there, 0 and NaN mean "not given", and a negative count or
an infinite scale would be taken or fail later with a less clear message."""

import math
import numbers

__all__ = ["checked", "checked_degree"]


def checked(name, value, kind):
    """``value`` of keyword ``name`` as the engine's field takes it, or ValueError saying what ``name``
    takes: ``kind`` ``str``, a string; ``bool``, True or False; ``float``, a finite number; ``int``, a whole number; a number,
    a whole number from it."""
    if kind is str:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string, got {value!r}")
        try:  # the engine takes UTF-8, which a lone surrogate ("\ud800") has no encoding in
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(f"{name} is not valid text: it holds the lone surrogate {value[error.start]!r} at "
                             f"position {error.start}") from None
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


def checked_degree(name, value):
    """A parallel degree: a whole number the engine's int holds (its lower bound is the engine's to check)."""
    value = checked(name, value, int)
    if abs(value) > 2**31 - 1:
        raise ValueError(f"{name} must be at most {2**31 - 1}, got {value}")
    return value
