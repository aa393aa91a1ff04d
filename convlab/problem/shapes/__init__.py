"""Real network layers as data: oneDNN's benchdnn convolution shape files.

The ``shapes_*.txt`` files here are verbatim copies from oneDNN
(``tests/benchdnn/inputs/conv/``, Apache-2.0), but for ``shapes_large_kernel.txt``,
convlab's own list of large-kernel layers from published networks in the same grammar;
``README.txt`` gives the source commit and the grammar (it also describes a few files
that are not shipped here: :func:`suites` lists what is). Benchmarks, the demo and the
tests read them through this module::

    >>> from convlab import shapes
    >>> layers = shapes.load_suite("resnet_50", mb=1)
    >>> layers[0].name, layers[0].output_shape, layers[0].pads_end
    ('resnet_50:conv1', (112, 112), (2, 2))
    >>> sum(layer.flops() * layer.multiplicity for layer in layers) / 1e9   # GFLOP/image
    7.71...
"""
from __future__ import annotations

from collections.abc import Iterable
from importlib import resources

from convlab.problem.shapes.descriptor import Layer, parse_descriptor, strip_comment

__all__ = ["Layer", "load_suite", "parse_descriptor", "parse_lines", "suites"]

_PREFIX, _SUFFIX = "shapes_", ".txt"


def _files():
    return {entry.name: entry for entry in resources.files(__name__).iterdir()
            if entry.name.startswith(_PREFIX) and entry.name.endswith(_SUFFIX)}


def suites() -> list[str]:
    """Names accepted by :func:`load_suite`, e.g. ``"resnet_50"``, sorted."""
    return sorted(name[len(_PREFIX):-len(_SUFFIX)] for name in _files())


def parse_lines(lines: Iterable[str], source: str = "<lines>") -> list[Layer]:
    """Parse a shape file's lines: ``#`` comments and blank lines are skipped.

    A bad line raises ``ValueError`` naming ``source`` and the line number.
    """
    layers = []
    for number, line in enumerate(lines, start=1):
        if not strip_comment(line).strip():
            continue
        try:
            layers.append(parse_descriptor(line))
        except ValueError as exc:
            raise ValueError(f"{source}, line {number}: {exc}") from None
    return layers


def load_suite(name: str, mb: int | None = None) -> list[Layer]:
    """The layers of one shipped suite, in file order.

    Parameters
    ----------
    name : str
        A suite name from :func:`suites` (``"resnet_50"``; ``"shapes_resnet_50"`` and
        ``"shapes_resnet_50.txt"`` work too).
    mb : int, optional
        Override every layer's minibatch, as benchdnn's ``--mb=N``.
    """
    if not isinstance(name, str):
        raise TypeError(f"suite name must be a str, got {type(name).__name__}")
    stem = name[:-len(_SUFFIX)] if name.endswith(_SUFFIX) else name
    stem = stem[len(_PREFIX):] if stem.startswith(_PREFIX) else stem
    files = _files()
    entry = files.get(_PREFIX + stem + _SUFFIX)
    if entry is None:
        raise ValueError(f"suite {name!r} is not known; expected one of {suites()}")
    layers = parse_lines(entry.read_text(encoding="utf-8").splitlines(), entry.name)
    if mb is not None:
        layers = [layer.with_mb(mb) for layer in layers]
    return layers
