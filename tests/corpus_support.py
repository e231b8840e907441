"""A small labelled corpus for the corpus-deduplication tests: distinct random documents, exact copies (changed
only in case and spacing) and near copies (a few words replaced), written in any of the input formats."""

from __future__ import annotations

import csv
import gzip
import json
import random
import zlib
from pathlib import Path

import pyarrow.parquet as pq

WORDS = ["river", "stone", "cloud", "lantern", "harbor", "meadow", "copper", "violet", "thunder", "orchard", "signal", "marble", "candle", "falcon", "willow", "ember", "quartz", "saddle", "glacier", "pepper", "compass", "velvet", "anchor", "timber"]


def documents(n: int = 60, seed: int = 0) -> list[dict]:
    """n distinct documents, then an exact copy of every 10th and a near copy (2 of 50 words changed: Jaccard of 3-shingles 42/54) of every
    7th; ids d<k>, e<k>, n<k>; a numeric `score` field."""
    rng = random.Random(seed)
    base = [" ".join(rng.choice(WORDS) for _ in range(50)) for _ in range(n)]
    rows = [{"id": f"d{k}", "text": text, "score": k % 5} for k, text in enumerate(base)]
    for k in range(0, n, 10):
        rows.append({"id": f"e{k}", "text": "  " + base[k].upper() + " ", "score": 9})
    for k in range(3, n, 7):
        words = base[k].split()
        for at in (10, 40):
            words[at] = "zzz"
        rows.append({"id": f"n{k}", "text": " ".join(words), "score": 1})
    return rows


def expected_removed(n: int = 60) -> dict[str, str]:
    """Removed id -> kept id under keep='first'."""
    out = {f"e{k}": f"d{k}" for k in range(0, n, 10)}
    out.update({f"n{k}": f"d{k}" for k in range(3, n, 7)})
    return out


def write(rows: list[dict], path: Path, fmt: str, compression: str | None = None) -> Path:
    """The rows as one file of `fmt` (jsonl, csv, parquet, text); gzip or zstd when asked."""
    path = Path(f"{path}.{ {'text': 'txt'}.get(fmt, fmt)}" + {None: "", "gzip": ".gz", "zstd": ".zst"}[compression])
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
        return path
    if fmt == "jsonl":
        data = "".join(json.dumps(r) + "\n" for r in rows)
    elif fmt == "text":
        data = "".join(r["text"] + "\n" for r in rows)
    else:
        import io

        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
        data = buffer.getvalue()
    raw = data.encode()
    if compression == "gzip":
        raw = gzip.compress(raw)
    elif compression == "zstd":
        import zstandard

        raw = zstandard.ZstdCompressor().compress(raw)
    path.write_bytes(raw)
    return path


def chain(seed: int = 5) -> list[dict]:
    """c0, c1 = c0 with 2 words changed, c2 = c1 with 2 more: c0 ~ c1 ~ c2 at 0.7, but c0 and c2 are not (about
    36/60): one cluster whose first document was never verified against its last."""
    rng = random.Random(seed)
    words = [rng.choice(WORDS) for _ in range(50)]
    out = [" ".join(words)]
    for at in ((10, 40), (20, 30)):
        words = list(words)
        for k in at:
            words[k] = f"q{k}"
        out.append(" ".join(words))
    return [{"id": f"c{k}", "text": text, "score": [0, 2, 1][k]} for k, text in enumerate(out)]


def corpus_folder(tmp_path):
    """Three JSON Lines files of `documents`, a fourth of `chain`, and a bad record at the end of part1."""
    rows = documents()
    folder = tmp_path / "in"
    folder.mkdir()
    for k in range(3):
        write(rows[k::3], folder / f"part{k}", "jsonl")
    write(chain(), folder / "part3", "jsonl")   # a cluster whose kept and last documents were never paired
    with open(folder / "part1.jsonl", "a") as file:
        file.write('{"id": "broken"\n')
    return folder


def outcome(output) -> tuple[list[str], list[dict]]:
    """The kept ids (sorted) and the duplicates table (by id, similarities to 12 digits) of a finished run."""
    summary = json.loads((output / "summary.json").read_text())
    kept = []
    for shard in summary["shards"]:
        kept += [json.loads(line)["id"] for line in open(shard)]
    table = pq.read_table(output / "duplicates.parquet").to_pylist()
    for row in table:
        row["similarity"] = round(row["similarity"], 12)
    return sorted(kept), sorted(table, key=lambda r: r["id"])


def shingles(text: str, n: int = 3) -> list[str]:
    words = text.lower().split()
    return [" ".join(words[k:k + n]) for k in range(len(words) - n + 1)]


def vector_rows(kind: str, n: int = 60) -> list[dict]:
    """`documents` as records that are not text: `tokens` (the text's word 3-shingles, an exact copy's in another
    order) or `vector` (counts of the shingles' columns, in the three vector forms: an exact copy's as
    {indices, values} in another order, every 4th original's as a dense list, the rest as {index: weight}
    objects). Same ids and expected removals."""
    rows = []
    for row in documents(n):
        grams = shingles(row["text"])
        if row["id"].startswith("e"):
            grams = grams[::-1]
        out = {"id": row["id"], "score": row["score"]}
        if kind == "tokens":
            out["tokens"] = grams
        else:
            counts: dict[int, int] = {}
            for g in grams:
                column = zlib.crc32(g.encode()) % 5000
                counts[column] = counts.get(column, 0) + 1
            if row["id"].startswith("e"):
                out["vector"] = {"indices": sorted(counts, reverse=True),
                                 "values": [counts[c] for c in sorted(counts, reverse=True)]}
            elif row["id"].startswith("d") and int(row["id"][1:]) % 4 == 1:
                out["vector"] = [counts.get(c, 0) for c in range(max(counts) + 1)]
            else:
                out["vector"] = {str(c): v for c, v in counts.items()}
        rows.append(out)
    return rows


def vector_folder(tmp_path, kind: str):
    """`vector_rows(kind)` in three JSON Lines files."""
    folder = tmp_path / "in"
    folder.mkdir()
    rows = vector_rows(kind)
    for k in range(3):
        write(rows[k::3], folder / f"part{k}", "jsonl")
    return folder
