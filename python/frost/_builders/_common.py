"""Helpers shared by the op-family builder modules."""

import numbers

from .._errors import InvalidValueError


def int_list(values, what):
    """A list of Python ints from a sequence of integers; InvalidValueError naming `what` otherwise."""
    try:
        values = list(values)
    except TypeError:
        raise InvalidValueError(f"{what}: expected a sequence of integers, got {type(values).__name__}") from None
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise InvalidValueError(f"{what}: {v!r} is not an integer")
    return [int(v) for v in values]


def set_tensors(attrs, setters):
    """Calls attrs.<setter>(tensor) for each (setter, tensor) pair whose tensor is not None."""
    for setter, t in setters:
        if t is not None:
            getattr(attrs, setter)(t)


def set_padding(attrs, what, padding, pre_padding, post_padding):
    """Sets `padding` on both sides, or `pre_padding` / `post_padding` apart (never both forms)."""
    if padding is not None:
        if pre_padding is not None or post_padding is not None:
            raise InvalidValueError(f"{what}: give padding or pre_padding/post_padding, not both")
        pre_padding = post_padding = padding
    if pre_padding is not None:
        attrs.set_pre_padding(int_list(pre_padding, f"{what}: pre_padding"))
    if post_padding is not None:
        attrs.set_post_padding(int_list(post_padding, f"{what}: post_padding"))


def reject_unsupported(what, **values):
    """InvalidValueError for the first keyword frost does not support that was given a value."""
    for keyword, value in values.items():
        unset = value is None or value is False or (isinstance(value, (list, tuple)) and not value)
        if not unset:
            raise InvalidValueError(f"{what}: {keyword} is not supported by frost")
