"""Compiled kernels (Cython, OpenMP). They only compute; choosing happens in Python.

Running from a source checkout (``python -m convlab`` or ``python -m pytest`` in the
repository root) imports this folder, which holds no compiled modules unless built
in place. ``extend_path`` lets the import fall through to the installed copy of this
package, so the README's commands work from the checkout after ``pip install .``.
"""
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
