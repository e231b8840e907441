"""PySpark's worker daemon with featurehash imported before it forks: each Python worker Spark starts is
a fork of the daemon, so the imports (the engines' columns and join steps, dedup, the map families the
join reads: GCWS, binning, the text front stage; numpy, scipy, pyarrow, numba) are paid once per
executor instead of once per worker. Other families are imported by the worker that first needs one.

    SparkSession.builder.config("spark.python.daemon.module", "featurehash.spark.daemon")

The map itself is still built by each worker on its first batch (`featurehash.engines.worker`), and its
kernels loaded from numba's cache (NUMBA_CACHE_DIR) or compiled there: a map built in the daemon would
be one spec's, and compiled kernels shared across a fork are not guaranteed safe with numba's threads.
"""

from __future__ import annotations

import pyarrow  # noqa: F401  (the Arrow batches every worker reads)
from pyspark import daemon

from .. import dedup  # noqa: F401
from ..maps.minhash import binning, gcws  # noqa: F401
from ..maps.text import hashing  # noqa: F401
from ..engines import columns, join_steps, outputs, worker  # noqa: F401

if __name__ == "__main__":
    daemon.manager()
