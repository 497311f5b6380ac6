"""Reads a trajectory file with h5py, as a user analysing a run would, and prints one line per
row: task_id, the row's tokens, then the weight version of each token (docs/architecture.md,
the trajectory file layout). The C++ test compares the lines with what it wrote.

usage: h5py_reference.py TRAJECTORIES.h5 OUT.txt
"""
import sys

import h5py


def main(path, out_path):
    with h5py.File(path, "r") as f, open(out_path, "w") as out:
        assert f.attrs["format"] in (b"astraflow-trajectories", "astraflow-trajectories"), f.attrs["format"]
        tokens = f["tokens"]
        offsets = f["token_offset"][:]
        versions = f["token_versions_flat"][:]
        task_ids = f["task_id"][:]
        for i in range(len(tokens)):
            n = len(tokens[i])
            row = versions[offsets[i]:offsets[i] + n]
            out.write(" ".join([str(int(task_ids[i])), str(n)] + [str(int(v)) for v in row]) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
