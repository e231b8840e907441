"""The labelled corpus of bench/bench_corpus_dedup.py, built from real texts on this machine.

Bases: paragraphs (>= 20 words) of /usr/share/common-licenses/*, /usr/share/doc/*/copyright and the Python
standard library's docstrings, exact copies dropped, then every paragraph whose word 3-shingle Jaccard with an
earlier kept one is >= 0.3 dropped too (licences repeat one another), so that bases are unrelated. Past those,
more bases are generated from the same texts' words (drawn by frequency, lengths drawn from the real
paragraphs'), as many as `--docs` needs. Plants: half the bases get 1-3 copies, each with word edits (replace, delete or
insert a word, each word with probability p) at a rate p drawn from EDIT_RATES (0: an exact copy, only case and
spacing changed). The documents are shuffled.

Truth: within each group (a base and its copies; groups are unrelated by construction) the graph of pairs with
exact Jaccard >= threshold over word 3-shingles (lower case, tokens r"(?u)\\b\\w\\w+\\b", as featurehash's default
analyzer); every document that is not the first (in corpus order) of its connected component is a duplicate to
remove."""

from __future__ import annotations

import ast
import glob
import json
import os
import re
import sysconfig
from collections import defaultdict
from pathlib import Path

import numpy as np

EDIT_RATES = (0.0, 0.01, 0.03, 0.05, 0.1, 0.15, 0.2, 0.3)
TOKEN = re.compile(r"(?u)\b\w\w+\b")


def real_paragraphs() -> list[str]:
    texts = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")) + sorted(glob.glob("/usr/share/doc/*/copyright")):
        try:
            texts.append(Path(path).read_text(errors="replace"))
        except OSError:
            pass
    stdlib = sysconfig.get_paths()["stdlib"]
    for path in sorted(glob.glob(f"{stdlib}/**/*.py", recursive=True)):
        if "site-packages" in path or "/test" in path:
            continue
        try:
            tree = ast.parse(Path(path).read_text(errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    texts.append(doc)
    seen, out = set(), []
    for text in texts:
        for paragraph in re.split(r"\n\s*\n", text):
            words = paragraph.split()
            key = " ".join(words).lower()
            if len(words) >= 20 and key not in seen:
                seen.add(key)
                out.append(" ".join(words))
    return out


def shingles(text: str) -> set[str]:
    tokens = TOKEN.findall(text.lower())
    return {" ".join(tokens[k:k + 3]) for k in range(len(tokens) - 2)}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def unrelated(paragraphs: list[str], limit: float = 0.3) -> list[str]:
    """Greedy: a paragraph is kept unless it shares >= `limit` Jaccard with a kept one (an inverted index of
    shingles finds the kept paragraphs that share any)."""
    index: dict[str, list[int]] = defaultdict(list)
    kept_sets, out = [], []
    for text in paragraphs:
        s = shingles(text)
        if not s:
            continue
        counts: dict[int, int] = defaultdict(int)
        for sh in s:
            for k in index.get(sh, ()):
                counts[k] += 1
        if any(c / (len(s) + len(kept_sets[k]) - c) >= limit for k, c in counts.items()):
            continue
        for sh in s:
            index[sh].append(len(kept_sets))
        kept_sets.append(s)
        out.append(text)
    return out


def generated_documents(paragraphs: list[str], n: int, rng: np.random.Generator, length_scale: float = 1.0,
                        ) -> list[str]:
    """n documents of words drawn independently by their frequency in the real paragraphs, lengths drawn from
    theirs: real words and lengths, and unrelated to one another and to the real paragraphs (a bigram model
    of licence text repeats its fixed phrases verbatim, which made its documents near duplicates of each
    other that no label recorded)."""
    words = " ".join(paragraphs).split()
    vocab, codes = np.unique(np.array(words, dtype=object), return_inverse=True)
    lengths = np.array([len(p.split()) for p in paragraphs])
    sizes = rng.choice(lengths, size=n)
    if length_scale != 1.0:   # longer documents: 5 GB of text from 5M documents without more of them in memory
        sizes = np.maximum(1, np.rint(sizes * length_scale)).astype(sizes.dtype)
    drawn = rng.choice(codes, size=int(sizes.sum())).astype(np.int32)
    cuts = np.cumsum(sizes)[:-1]
    return [" ".join(vocab[part]) for part in np.split(drawn, cuts)]


def edited(text: str, rate: float, vocab: list[str], rng: np.random.Generator) -> str:
    if rate == 0.0:
        return "  " + text.upper() if rng.random() < 0.5 else text.replace(" ", "   ")
    out = []
    for word in text.split():
        u = rng.random()
        if u >= rate:
            out.append(word)
            continue
        kind = rng.integers(3)
        if kind == 0:
            out.append(vocab[int(rng.integers(len(vocab)))])
        elif kind == 2:
            out += [word, vocab[int(rng.integers(len(vocab)))]]
    return " ".join(out)


def build(n_docs: int, threshold: float, seed: int = 0, real: list[str] | None = None, truth: bool = True,
          length_scale: float = 1.0):
    """(documents [{"id", "text"}], truth: set of ids to remove (None without `truth`), rate of each planted id,
    number of real bases)."""
    rng = np.random.default_rng(seed)
    real = unrelated(real_paragraphs()) if real is None else real
    per_base = 1 + 0.5 * 2   # half the bases get 1-3 copies (2 on average)
    n_bases = max(1, int(n_docs / per_base))
    bases = real[:n_bases] + (generated_documents(real, n_bases - len(real), rng, length_scale) if n_bases > len(real) else [])
    vocab = sorted({w for p in real for w in p.split()})
    docs, group, rate_of = [], [], {}
    for g, base in enumerate(bases):
        docs.append(base)
        group.append(g)
        if rng.random() < 0.5:
            for _ in range(int(rng.integers(1, 4))):
                rate = float(EDIT_RATES[int(rng.integers(len(EDIT_RATES)))])
                docs.append(edited(base, rate, vocab, rng))
                group.append(g)
                rate_of[len(docs) - 1] = rate
    order = rng.permutation(len(docs))[:n_docs]
    rows = [{"id": f"doc{k}", "text": docs[k]} for k in order]
    truth = _truth(docs, group, order, threshold) if truth else None
    rates = {f"doc{k}": r for k, r in rate_of.items()}
    return rows, truth, rates, min(len(real), n_bases)


def _truth(docs, group, order, threshold: float) -> set[str]:
    members: dict[int, list[int]] = defaultdict(list)
    for k in order:   # corpus order
        members[group[k]].append(int(k))
    removed = set()
    for ks in members.values():
        if len(ks) < 2:
            continue
        sets = [shingles(docs[k]) for k in ks]
        parent = list(range(len(ks)))
        for a in range(len(ks)):
            for b in range(a + 1, len(ks)):
                if sets[a] == sets[b] or jaccard(sets[a], sets[b]) >= threshold:
                    ra, rb = _find(parent, a), _find(parent, b)
                    parent[max(ra, rb)] = min(ra, rb)
        removed.update(f"doc{ks[a]}" for a in range(len(ks)) if _find(parent, a) != a)
    return removed


def _find(parent: list[int], a: int) -> int:
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


def write_jsonl(rows: list[dict], folder: str, shards: int = 8) -> int:
    """The rows as `shards` JSON Lines files; their total bytes."""
    os.makedirs(folder, exist_ok=True)
    size = 0
    per = -(-len(rows) // shards)
    for s in range(shards):
        with open(f"{folder}/part-{s:03d}.jsonl", "w") as file:
            for row in rows[s * per:(s + 1) * per]:
                line = json.dumps(row) + "\n"
                file.write(line)
                size += len(line.encode())
    return size
