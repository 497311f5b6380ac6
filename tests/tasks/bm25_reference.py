#!/usr/bin/env python3
"""BM25 scores from the bm25s library (requirements/test.txt), the reference tests/tasks/test_bm25.cpp
compares astraflow's index with:

    bm25_reference.py IN.json OUT.json K1 B

IN.json is {"documents": [[term, ...], ...], "queries": [[term, ...], ...]}: the documents and
queries as lists of words (the C++ side splits them; this compares the scoring). OUT.json is
{"scores": [[score of each document], ...]}, one row per query, from bm25s' "lucene" method.
"""
import json
import sys

import bm25s


def main():
    source, out, k1, b = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    with open(source, encoding="utf-8") as f:
        data = json.load(f)
    retriever = bm25s.BM25(method="lucene", k1=k1, b=b)
    retriever.index(data["documents"], show_progress=False)
    scores = [[float(s) for s in retriever.get_scores(q)] for q in data["queries"]]
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"scores": scores}, f)


if __name__ == "__main__":
    main()
