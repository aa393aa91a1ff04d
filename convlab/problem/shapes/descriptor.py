"""One oneDNN benchdnn convolution problem descriptor -> one :class:`Layer`.

The grammar is benchdnn's (``tests/benchdnn/doc/knobs_desc.md`` and ``driver_conv.md``),
summarised in ``README.txt`` next to this module. In short::

    gXmbX_icXidXihXiwX_ocXodXohXowX_kdXkhXkwX_sdXshXswX_pdXphXpwX_ddXdhXdwX_nS

Defaults: g=1, mb=2, strides 1, dilation 0 (benchdnn's dilation is 0-based: ``dh1`` is
convlab's ``dilations=2``). With the output omitted it is computed from the padding
(default 0); with the output given and the padding omitted the padding is computed. The
end ("right") padding is never written: it is whatever makes the stated output come out,
``P_e = (O-1)*S - I + ((K-1)*D + 1) - P_b``. When the w values are absent they copy h
("square"), and when h and w are both absent they copy d ("cubic").

benchdnn divides with C semantics (truncation toward zero); so do we, so that the numbers
match what benchdnn itself would run.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from convlab.problem import _geometry

# Value keys in benchdnn's order. "n" (the name) is handled apart: it ends the descriptor.
KEYS = ("g", "mb", "ic", "id", "ih", "iw", "oc", "od", "oh", "ow", "kd", "kh", "kw",
        "sd", "sh", "sw", "pd", "ph", "pw", "dd", "dh", "dw")
AXES = ("d", "h", "w")
# Per-axis quantities: input, output, kernel, stride, begin padding, 0-based dilation.
_PER_AXIS = ("i", "o", "k", "s", "p", "d")
_AXIS_DEFAULTS = {"i": 1, "o": 1, "k": 1, "s": 1, "p": 0, "d": 0}

_TOKEN = re.compile(r"(g|mb|ic|id|ih|iw|oc|od|oh|ow|kd|kh|kw|sd|sh|sw|pd|ph|pw|dd|dh|dw)"
                    r"(-?[0-9]*)")
_MULTIPLICITY = re.compile(r"^(.*)\*([0-9]+)$", re.DOTALL)


def _c_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as C's ``/`` (Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def strip_comment(line: str) -> str:
    """The line without a ``#`` comment (a ``#`` inside quotes belongs to a name)."""
    quote = None
    for index, char in enumerate(line):
        if char in "\"'":
            quote = None if quote == char else (char if quote is None else quote)
        elif char == "#" and quote is None:
            return line[:index]
    return line


@dataclass(frozen=True)
class Layer(_geometry.GroupedGeometry):
    """A convolution layer from a benchdnn shape file, in convlab's terms.

    Spatial tuples have ``rank`` entries ordered (depth, height, width), trimmed to the
    axes present. ``dilations`` are convlab's (1 = dense), i.e. benchdnn's value + 1.
    ``pads_end`` may be negative (benchdnn's derived right padding crops when the last
    input rows are never read). ``multiplicity`` is the ``*N`` suffix of the name: how many
    times the shape occurs in the network.
    """

    name: str
    multiplicity: int
    descriptor: str = field(default="", compare=False)

    # benchdnn's names for the shared geometry (its descriptor words mb, ic, oc)
    @property
    def mb(self) -> int:
        return self.batch

    @property
    def ic(self) -> int:
        return self.in_channels

    @property
    def oc(self) -> int:
        return self.out_channels

    @property
    def short_name(self) -> str:
        """The name without its ``network:`` prefix (``"resnet_50:conv1"`` -> ``"conv1"``)."""
        return self.name.rsplit(":", 1)[-1] if self.name else "(unnamed)"

    def _mb(self, mb: int | None) -> int:
        if mb is None:
            return self.mb
        if isinstance(mb, bool) or not isinstance(mb, (int, np.integer)) or mb < 1:
            raise ValueError(f"mb={mb!r} must be a positive int (or None for the layer's "
                             f"mb={self.mb})")
        return int(mb)

    def flops(self, mb: int | None = None) -> int:
        """``2 * mb * OC * prod(O) * IC/G * prod(K)``: benchdnn's convention, padding taps
        included, for one occurrence (multiply by ``multiplicity`` for the network)."""
        return (2 * self._mb(mb) * self.oc * math.prod(self.output_shape)
                * (self.ic // self.groups) * math.prod(self.kernel_shape))

    def with_mb(self, mb: int) -> Layer:
        """The same layer at another minibatch (benchdnn's ``--mb=N`` knob)."""
        return replace(self, batch=self._mb(mb))

    def src_shape(self, mb: int | None = None) -> tuple[int, ...]:
        """src shape in convlab's default NXC layout."""
        return (self._mb(mb), *self.input_shape, self.ic)

    def weights_shape(self) -> tuple[int, ...]:
        """weights shape in convlab's default XIO layout."""
        return (*self.kernel_shape, self.ic // self.groups, self.oc)

    def dst_shape(self, mb: int | None = None) -> tuple[int, ...]:
        """dst shape in convlab's default NXC layout."""
        return (self._mb(mb), *self.output_shape, self.oc)

    def convolve_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`convlab.convolve` that describe this layer."""
        return dict(strides=self.strides, dilations=self.dilations,
                    pads_begin=self.pads_begin, pads_end=self.pads_end, groups=self.groups)

    def arrays(self, mb: int | None = None, *, dtype=np.float32, seed: int = 0,
               bias: bool = False):
        """Random ``(src, weights, bias)`` in NXC / XIO, uniform in [-1, 1); ``bias`` is
        ``None`` unless asked for."""
        rng = np.random.default_rng(seed)
        src = rng.uniform(-1, 1, self.src_shape(mb)).astype(dtype)
        weights = rng.uniform(-1, 1, self.weights_shape()).astype(dtype)
        b = rng.uniform(-1, 1, (self.oc,)).astype(dtype) if bias else None
        return src, weights, b

    def problem(self, mb: int | None = None, dtype=np.float32, bias: bool = False):
        """The :class:`convlab.ConvProblem` convlab builds for this layer (validated)."""
        from convlab.problem.params import make_problem

        return make_problem(self.src_shape(mb), dtype, self.weights_shape(), dtype,
                            (self.oc,) if bias else None, dtype if bias else None,
                            **self.convolve_kwargs())

    def canonical(self) -> str:
        """The benchdnn canonical descriptor (every value written, dilation 0-based).

        A negative begin padding is left out: only the rule that derives the padding from
        the output gives one (a written negative value is refused), and parsing applies
        that rule again.
        """
        axes = AXES[3 - self.rank:]

        def spatial(prefix, values):
            return "".join(f"{prefix}{axis}{v}" for axis, v in zip(axes, values)
                           if prefix != "p" or v >= 0)

        name = self.name + (f"*{self.multiplicity}" if self.multiplicity != 1 else "")
        text = (f"g{self.groups}mb{self.mb}_ic{self.ic}{spatial('i', self.input_shape)}"
                f"_oc{self.oc}{spatial('o', self.output_shape)}"
                f"_{spatial('k', self.kernel_shape)}_{spatial('s', self.strides)}"
                f"_{spatial('p', self.pads_begin)}"
                f"_{spatial('d', (d - 1 for d in self.dilations))}")
        return text + (f'_n"{name}"' if name else "")


def _tokens(text: str, where: str):
    """Split into {key: value} and the raw name; every malformed piece is an error."""
    values: dict[str, int] = {}
    name = ""
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char == "_":
            pos += 1
            continue
        if char == "n":
            name = text[pos + 1:].strip()
            break
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"{where}: unexpected {text[pos:pos + 8]!r} at position {pos}; "
                             f"expected one of {', '.join(KEYS)} followed by a number, '_', "
                             f"or n<name> at the end")
        key, digits = match.groups()
        if digits in ("", "-"):
            raise ValueError(f"{where}: {key!r} at position {pos} has no value; expected "
                             f"a non-negative integer after it")
        if digits.startswith("-"):
            raise ValueError(f"{where}: {key}={digits} is negative; expected a "
                             f"non-negative integer")
        if key in values:
            raise ValueError(f"{where}: {key} is given twice ({key}{values[key]} and "
                             f"{key}{digits}); expected each key at most once")
        values[key] = int(digits)
        pos = match.end()
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "\"'":
        name = name[1:-1]
    return values, name


def parse_descriptor(text: str) -> Layer:
    """Parse one benchdnn convolution descriptor, e.g.
    ``'mb1ic64ih56oc64oh56kh3ph1n"resnet_50:res2a_branch2b*3"'``.

    A trailing ``# comment`` is ignored. Raises ``ValueError`` naming the problem for
    anything benchdnn would reject, and for a few things it would silently accept
    (repeated keys, zero sizes, an explicit w value overridden by the square rule).
    """
    if not isinstance(text, str):
        raise TypeError(f"descriptor must be a str, got {type(text).__name__}")
    body = strip_comment(text).strip()
    where = f"descriptor {text.strip()!r}"
    if not body:
        raise ValueError(f"{where} is empty (or only a comment); expected e.g. "
                         f"'mb1ic64ih56oc64oh56kh3ph1'")
    values, raw_name = _tokens(body, where)

    _check_sizes(values, where)
    name, multiplicity = _name_and_multiplicity(raw_name, where)
    axes = _resolve_axes(values, where)
    rank = _fill_axes(axes, values, where)

    groups = values.get("g", 1)
    ic, oc = values["ic"], values["oc"]
    if ic % groups or oc % groups:
        raise ValueError(f"{where}: g={groups} must divide ic={ic} and oc={oc}")

    used_axes = AXES[3 - rank:]

    def spatial(q):
        return tuple(axes[a][q] for a in used_axes)

    pads_end = tuple(
        (ax["o"] - 1) * ax["s"] - ax["i"] + (ax["k"] - 1) * (ax["d"] + 1) + 1 - ax["p"]
        for ax in (axes[a] for a in used_axes))
    return Layer(name=name, multiplicity=multiplicity, batch=values.get("mb", 2),
                 groups=groups, in_channels=ic, out_channels=oc, input_shape=spatial("i"),
                 kernel_shape=spatial("k"), output_shape=spatial("o"), strides=spatial("s"),
                 dilations=tuple(d + 1 for d in spatial("d")), pads_begin=spatial("p"),
                 pads_end=pads_end, descriptor=text.strip())


def _check_sizes(values: dict[str, int], where: str) -> None:
    for key in ("g", "mb", "ic", "oc") + tuple(q + a for q in "iosk" for a in AXES):
        if values.get(key, 1) < 1:
            raise ValueError(f"{where}: {key}={values[key]} must be >= 1")
    for key in ("ic", "oc"):
        if key not in values:
            raise ValueError(f"{where}: {key} is missing; ic and oc are mandatory")


def _name_and_multiplicity(raw_name: str, where: str) -> tuple[str, int]:
    """The name and the ``*N`` multiplicity at its end."""
    # The canonical form quotes the name, and a shape file holds one descriptor per line.
    if '"' in raw_name or "".join(raw_name.splitlines()) != raw_name:
        raise ValueError(f"{where}: the name {raw_name!r:.80} holds a double quote or a line "
                         f"break; expected n\"name\" with neither inside")
    name, multiplicity = raw_name, 1
    found = _MULTIPLICITY.match(raw_name)
    if found:
        name, multiplicity = found.group(1), int(found.group(2))
        if multiplicity < 1:
            raise ValueError(f"{where}: multiplicity *{multiplicity} in the name must be "
                             f">= 1")
    return name, multiplicity


def _resolve_axes(values: dict[str, int], where: str) -> dict[str, dict[str, int]]:
    """Each used axis' i, o, k, s, p, d (benchdnn's 0-based dilation), derived as benchdnn
    derives the ones not given."""
    # An axis is used when any of its sizes or a non-trivial stride, padding or dilation is
    # given (benchdnn: "sd1", "pd0", "dd0" alone do not make a problem 3-D).
    def used(axis: str) -> bool:
        return (any(q + axis in values for q in "iko") or values.get("d" + axis, 0) > 0
                or values.get("s" + axis, 1) != 1 or values.get("p" + axis, 0) > 0)

    axes: dict[str, dict[str, int]] = {}
    for axis in AXES:
        if not used(axis):
            continue
        for q in "ik":
            if q + axis not in values:
                present = [q2 + axis for q2 in _PER_AXIS if q2 + axis in values]
                raise ValueError(f"{where}: {q}{axis} is missing; the {axis} axis is used "
                                 f"({', '.join(present)} given) so i{axis} and k{axis} are "
                                 f"mandatory")
        i, k = values["i" + axis], values["k" + axis]
        s, dil = values.get("s" + axis, 1), values.get("d" + axis, 0)
        extent = (k - 1) * (dil + 1) + 1
        if "o" + axis in values:
            o = values["o" + axis]
            p = values.get("p" + axis, _c_div((o - 1) * s - i + extent, 2))
        else:
            p = values.get("p" + axis, 0)
            o = _c_div(i - extent + 2 * p, s) + 1
            if o < 1:
                raise ValueError(f"{where}: the {axis} output would be {o} (I={i}, K={k}, "
                                 f"dilated extent {extent}, S={s}, P={p}); expected >= 1")
        axes[axis] = dict(i=i, o=o, k=k, s=s, p=p, d=dil)
    return axes


def _fill_axes(axes: dict[str, dict[str, int]], values: dict[str, int], where: str) -> int:
    """Copy and default the axes not used by themselves, as benchdnn does (refusing a
    value that copy would override); returns the spatial rank."""
    if "d" in axes:
        if "h" not in axes and "w" not in axes:
            axes["h"] = dict(axes["d"])
            axes["w"] = dict(axes["d"])
        elif ("h" in axes) != ("w" in axes):
            raise ValueError(f"{where}: a 3-D problem needs both the h and w axes or "
                             f"neither (then they copy d); only "
                             f"{'h' if 'h' in axes else 'w'} is given")
        rank = 3
    elif "h" in axes:
        if "w" not in axes:
            axes["w"] = dict(axes["h"])
        rank = 2
    elif "w" in axes:
        rank = 1
    else:
        raise ValueError(f"{where}: no spatial axis; expected at least iw and kw (1-D), "
                         f"ih and kh (2-D) or id and kd (3-D)")
    for axis in AXES:
        axes.setdefault(axis, dict(_AXIS_DEFAULTS))
    # benchdnn overwrites a lone "pw1"/"sw2" with the copied h value; refuse instead.
    for axis in AXES:
        for q in _PER_AXIS:
            key = q + axis
            if key in values and values[key] != axes[axis][q]:
                raise ValueError(f"{where}: {key}={values[key]} is overridden by "
                                 f"{axes[axis][q]} (the {axis} axis is not used by itself, "
                                 f"so it copies another axis or takes the default); give "
                                 f"i{axis} and k{axis} too to make it count")
    return rank
