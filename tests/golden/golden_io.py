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


def golden_cases(cases, fixed_input: Callable[[int, int], list], input_offset: int,
                 outputs: Callable[[object, np.ndarray], dict]) -> dict:
    """The document of (name, request) cases: each resolved spec, a fixed input chosen by the spec's
    seed (`input_offset` keeps the generators' inputs apart) and today's outputs on it."""
    from featurehash.maps import create_map

    built = {}
    for name, request in cases:
        m = create_map(request)
        X = fixed_input(m.spec.input_dim, input_offset + m.spec.seed % 1000)
        built[name] = {"request": request, "spec": m.describe(), "input": X,
                       "expected": outputs(m, np.array(X, dtype=np.float64))}
    return golden_document(cases=built)


def single_file_main(description: str, output: Path, build: Callable[[], dict], argv: list[str] | None) -> int:
    """The command line of a generator that writes one file: --force to overwrite, --output elsewhere."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--force", action="store_true", help=f"overwrite an existing {output.name}")
    parser.add_argument("--output", type=Path, default=output)
    args = parser.parse_args(argv)
    return write_golden({args.output: build}, args.force)
