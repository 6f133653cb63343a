"""What a package supplies to run the chaos suite: its matrix spec, and how its framework defers calls."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from dex_agents.testing._matrix_spec import MatrixSpec

__all__ = ["ChaosSpec", "load_chaos_spec"]


@dataclass(frozen=True)
class ChaosSpec:
    """A package's chaos configuration.

    The chaos run uses the matrix's main Flow (its runner, scripted model, tools, tool policies and Worker
    module), so a package that runs the matrix needs nothing else unless its framework limits what one
    model response may hold.

    Attributes:
        matrix: The package's matrix spec.
        one_deferred_call_per_response: The framework defers at most one call per model response, the last
            one, and runs the reads before it inline (a whole-turn harness such as the Claude Code CLI's);
            the chaos scripts then put at most one call that is not a read in a response, after its reads.
    """

    matrix: MatrixSpec
    one_deferred_call_per_response: bool = False


def load_chaos_spec(reference: str) -> ChaosSpec:
    """Import a ``module:attribute`` that names a :class:`ChaosSpec` or a :class:`MatrixSpec`.

    Args:
        reference: Such as ``tests.matrix_spec:SPEC``, imported from the working directory.

    Returns:
        The chaos spec (a matrix spec gets the defaults).

    Raises:
        ValueError: If the reference is malformed or names something else.
    """
    module_name, separator, attribute = reference.partition(":")
    if not separator or not module_name or not attribute:
        raise ValueError(
            f"a spec reference is module:attribute, such as tests.matrix_spec:SPEC; got {reference!r}"
        )
    value: object = getattr(importlib.import_module(module_name), attribute)
    if isinstance(value, ChaosSpec):
        return value
    if isinstance(value, MatrixSpec):
        return ChaosSpec(matrix=value)
    raise ValueError(f"{reference} is a {type(value).__name__}, not a ChaosSpec or a MatrixSpec")
