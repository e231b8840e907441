"""Run Python blocks of one documentation page in this process, each in a fresh namespace, as a reader
pasting it into a new interpreter would (imports stay loaded: a block pays numpy's and numba's only once).

    python run_blocks.py BLOCKS.json RESULTS.json

BLOCKS.json: [{"label", "code"}]; RESULTS.json gets [{"label", "ok", "error", "seconds"}]. Started by
tests/docs/test_doc_blocks.py in a scratch directory holding a copy of examples/.
"""

from __future__ import annotations

import json
import sys
import time
import traceback


def main() -> None:
    blocks = json.loads(open(sys.argv[1], encoding="utf-8").read())
    results = []
    for block in blocks:
        start = time.perf_counter()
        namespace = {"__name__": "__main__"}
        try:
            exec(compile(block["code"], block["label"], "exec"), namespace)
            error = None
        except BaseException:  # noqa: BLE001  (SystemExit too: a block must not end the page)
            error = traceback.format_exc(limit=-8)
        results.append({"label": block["label"], "ok": error is None, "error": error,
                        "seconds": round(time.perf_counter() - start, 3)})
        with open(sys.argv[2], "w", encoding="utf-8") as out:   # after each: a crash keeps the earlier ones
            json.dump(results, out)
        print(f"--- {block['label']}: {'ok' if error is None else 'FAILED'} in {results[-1]['seconds']} s",
              flush=True)


if __name__ == "__main__":
    main()
