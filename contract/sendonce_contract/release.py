"""The release number every sendonce distribution carries: set here, once, for a release (see CHANGELOG.md).

The contract's build reads it directly; the construct's and the producer's builds read it through their
``hatch_build.py``, which also pins ``sendonce-contract`` to it.
"""

__version__ = "0.2.0"
