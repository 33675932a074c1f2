"""Build hook of the producer's and the construct's distributions: their version, and their pin of
sendonce-contract, from the one release number in ``contract/sendonce_contract/release.py``.

The construct's build (the repository's root) names this file too, and its sdist carries it at the same path. An
sdist records the version and the dependencies in its PKG-INFO, from which a wheel built from the sdist takes them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface

_VERSION = re.compile(r'^__version__ = "(?P<version>[^"]+)"$', re.MULTILINE)


class ReleaseVersion(MetadataHookInterface):
    """Sets ``version``, and ``dependencies`` from the hook's own list with ``{release}`` replaced by it."""

    def update(self, metadata: dict[str, Any]) -> None:
        release_file = Path(self.root, self.config["release-file"])
        found = _VERSION.search(release_file.read_text(encoding="utf-8"))
        if found is None:
            raise ValueError(f'{release_file} has no line __version__ = "X.Y.Z"')
        version = found["version"]
        metadata["version"] = version
        metadata["dependencies"] = [d.replace("{release}", version) for d in self.config["dependencies"]]
