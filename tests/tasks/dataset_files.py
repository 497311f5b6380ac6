#!/usr/bin/env python3
"""Prompt datasets as users get them, written with Hugging Face `datasets` and pyarrow
(requirements/test.txt) for tests/tasks/test_dataset_files.cpp:

    dataset_files.py OUT_DIR

writes into OUT_DIR
  verl.parquet     verl's layout (DAPO-Math-17k's): `prompt` a conversation, `reward_model`
                   {ground_truth, style}, `data_source`, `extra_info` {index, split}
  saved/           a `datasets` folder (save_to_disk, 3 shards) with MATH-500's columns: problem,
                   solution, answer, subject, level
  mapped.parquet   other column names (question_text, final as an integer, tags a list)
  bad.parquet      good rows among rows that cannot be used (a null, an integer or an empty prompt,
                   a list as the answer)
  none.parquet     rows without any prompt column
  apps.parquet     APPS / TACO's layout: question, input_output (call-based tests as a JSON string)
  stream.arrow     an Arrow IPC stream, file.arrow an IPC file (pyarrow), both of verl's layout
and expected.json: each file's rows as `datasets` / pyarrow read them (to_list), the reference the
C++ reader is compared with.
"""
import json
import os
import struct
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Dataset

DAPO_SUFFIX = "Let's think step by step and output the final answer within \\boxed{}."


def verl_rows(n):
    return [
        {
            "data_source": "math_dapo",
            "prompt": [{"role": "user", "content": f"Solve {i} + {2 * i} = ? (row {i})\n\n{DAPO_SUFFIX}"}],
            "ability": "MATH",
            "reward_model": {"ground_truth": str(3 * i), "style": "rule-lighteval/MATH_v2"},
            "extra_info": {"index": i, "split": "train"},
        }
        for i in range(n)
    ]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    expected = {}

    verl = Dataset.from_list(verl_rows(50))
    verl.to_parquet(os.path.join(out, "verl.parquet"))
    expected["verl.parquet"] = Dataset.from_parquet(os.path.join(out, "verl.parquet")).to_list()

    math500 = Dataset.from_list(
        [
            {
                "problem": f"What is ${i}^2$? ({i})",
                "solution": f"We have ${i}^2 = {i * i}$, so the answer is $\\boxed{{{i * i}}}$.",
                "answer": str(i * i),
                "subject": ["Algebra", "Geometry", "Number Theory"][i % 3],
                "level": 1 + i % 5,
            }
            for i in range(30)
        ]
    )
    math500.save_to_disk(os.path.join(out, "saved"), num_shards=3)
    from datasets import load_from_disk

    expected["saved"] = load_from_disk(os.path.join(out, "saved")).to_list()

    mapped = pa.table(
        {
            "question_text": [f"How many legs do {i} spiders have?" for i in range(20)],
            "final": pa.array([8 * i for i in range(20)], pa.int64()),
            "tags": [["counting", f"t{i}"] for i in range(20)],
        }
    )
    pq.write_table(mapped, os.path.join(out, "mapped.parquet"), row_group_size=7)
    expected["mapped.parquet"] = pq.read_table(os.path.join(out, "mapped.parquet")).to_pylist()

    bad = pa.table(
        {
            "prompt": pa.array(["good 1", None, "good 2", "", "good 3", "good 4"], pa.string()),
            "answer": pa.array(["1", "2", "3", "4", "5", "6"]),
        }
    )
    # A row whose answer is a list and one whose prompt is an integer need columns of those types.
    pq.write_table(bad, os.path.join(out, "bad.parquet"))
    odd = pa.table({"prompt": pa.array([7, 8], pa.int64()), "answer": pa.array([["x"], ["y"]])})
    pq.write_table(odd, os.path.join(out, "odd.parquet"))
    expected["bad.parquet"] = pq.read_table(os.path.join(out, "bad.parquet")).to_pylist()

    pq.write_table(pa.table({"text": ["no prompt here"] * 4}), os.path.join(out, "none.parquet"))

    # APPS / TACO: the tests a JSON string in `input_output`, call-based with fn_name.
    apps = Dataset.from_list(
        [
            {
                "question": f"Write add{i}(a, b) returning a + b + {i}.",
                "input_output": json.dumps({"fn_name": f"add{i}", "inputs": [[1, 2], [3, 4]], "outputs": [3 + i, 7 + i]}),
                "difficulty": "introductory",
            }
            for i in range(5)
        ]
    )
    apps.to_parquet(os.path.join(out, "apps.parquet"))
    expected["apps.parquet"] = Dataset.from_parquet(os.path.join(out, "apps.parquet")).to_list()

    table = pa.Table.from_pylist(verl_rows(12))
    with pa.OSFile(os.path.join(out, "stream.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table, max_chunksize=5)
    with pa.OSFile(os.path.join(out, "file.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table, max_chunksize=5)
    expected["stream.arrow"] = table.to_pylist()
    expected["file.arrow"] = table.to_pylist()

    # Rows users meet: both a prompt and a conversation (ultrachat, no_robots), float answers of
    # both widths, a bytes column (an image's).
    odd_rows = pa.table(
        {
            "prompt": ["the text", "the text 2"],
            "messages": [[{"role": "user", "content": "the conversation"}], [{"role": "user", "content": "c2"}]],
            "answer32": pa.array([1234.56, 0.1], pa.float32()),
            "answer64": pa.array([0.00001, 2.5e20], pa.float64()),
            "image": pa.array([b"\x89PNG\xff", b"\x00\x01"], pa.binary()),
        }
    )
    pq.write_table(odd_rows, os.path.join(out, "both.parquet"))

    # A malformed Arrow file: a string column whose offsets point past its data (valid to a light
    # check, not to a full one).
    offsets = pa.py_buffer(struct.pack("<4i", 0, 2, 2_000_000_000, 4))
    bad_strings = pa.Array.from_buffers(pa.string(), 3, [None, offsets, pa.py_buffer(b"abcd")])
    broken = pa.table({"prompt": bad_strings, "answer": ["1", "2", "3"]})
    with pa.OSFile(os.path.join(out, "broken.arrow"), "wb") as sink, pa.ipc.new_stream(sink, broken.schema) as w:
        w.write_table(broken)

    # A folder that is not a save_to_disk one: the cache's per-split files.
    os.makedirs(os.path.join(out, "cache"), exist_ok=True)
    for split in ("train", "test"):
        pq.write_table(pa.table({"prompt": [split]}), os.path.join(out, "cache", f"gsm8k-{split}.parquet"))

    with open(os.path.join(out, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f)


if __name__ == "__main__":
    main()
