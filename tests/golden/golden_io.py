"""What the golden-vector generators share: the document header and the guarded write.

Golden vectors change only deliberately: an existing file is overwritten only with --force.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import scipy

from featurehash import __version__
from featurehash.maps import FORMAT_VERSION


def golden_document(**sections) -> dict:
    """The format version and the versions that generated the file, then the sections."""
    return {
        "format_version": FORMAT_VERSION,
        "generated_with": {"featurehash": __version__, "numpy": np.__version__, "scipy": scipy.__version__,
                           "python": sys.version.split()[0]},
        **sections,
    }


def write_golden(builders: dict[Path, Callable[[], dict]], force: bool) -> int:
    """Write each path's document (built only when writing); refuse existing files without force."""
    existing = [str(path) for path in builders if path.exists()]
    if existing and not force:
        print(f"{', '.join(existing)} exist(s); golden vectors change only deliberately (use --force)",
              file=sys.stderr)
        return 1
    for path, build in builders.items():
        path.write_text(json.dumps(build(), indent=1) + "\n")
        print(f"wrote {path}")
    return 0
