"""Python's fit on a matrix in memory against `polymargin train` on shards of the same rows (a9a).

usage: PYTHONPATH=build/python /usr/bin/python3 bench/python_memory.py [BUILD] [REPEATS] [BEFORE]

BUILD: the build tree (default build/); REPEATS: runs a row (default 11); BEFORE: the Python
package directory (PYTHONPATH) of a build before fit trained from memory, whose fit wrote the
matrix into temporary shards first (optional; its row is left out without it).

Rows, each the median of REPEATS runs, all interleaved in this one run, so that a change of the
machine's load hits every row alike:
  polymargin train --algo ldm SHARDS   the whole command (process start, open, train, the model
                                       written) on the raw shards _core.write_shards writes from
                                       the matrix: the blocks fit reads, so the same model
  LDMClassifier().fit(X, y)            the matrix's rows handed to the training library in memory
  ... through temporary shards         this build: _core.write_shards into a temporary directory,
                                       then fit on it (what fit did before, less its checks of X)
  ... BEFORE's fit(X, y)               the package BEFORE, in a child process that times its own
                                       fits of the same matrix when asked
The ratio column is against the command line. The script checks that the models are identical.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from sklearn.datasets import load_svmlight_file

import polymargin as pm
from polymargin import _core

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 11
BEFORE = sys.argv[3] if len(sys.argv) > 3 else None
SHARED = os.path.join(ROOT, os.pardir, "shared", "data", "a9a", "a9a")

# The child of BEFORE: loads the matrix, then fits it once per line it reads, answering the
# seconds each fit took.
CHILD = """
import sys, time
from sklearn.datasets import load_svmlight_file
import polymargin as pm
X, y = load_svmlight_file(sys.argv[1], n_features=123)
pm.LDMClassifier().fit(X, y)
print("ready", flush=True)
for _ in sys.stdin:
    start = time.perf_counter()
    pm.LDMClassifier().fit(X, y)
    print(time.perf_counter() - start, flush=True)
"""


def a9a_text(tmp):
    """The a9a training file: the shared copy, else the bundled one (the same bytes)."""
    if os.path.exists(SHARED):
        return SHARED
    path = os.path.join(tmp, "a9a")
    with open(path, "wb") as f:
        subprocess.run(["zstd", "-dcq", os.path.join(ROOT, "data", "a9a.zst")], stdout=f,
                       check=True)
    return path


def write_shards(directory, X, y):
    _core.write_shards(directory, X.indptr.astype(np.int64), X.indices, X.data,
                       np.asarray(y, dtype=np.float64), columns=X.shape[1])


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    tmp = tempfile.mkdtemp(prefix="polymargin-bench-")
    text = a9a_text(tmp)
    X, y = load_svmlight_file(text, n_features=123)
    shards, cli_model = os.path.join(tmp, "a9a.shards"), os.path.join(tmp, "cli.model")
    write_shards(shards, X, y)
    command = [os.path.join(BUILD, "polymargin"), "train", "--algo", "ldm", shards, "-o", cli_model,
               "--data-name", "a9a"]

    def through_shards():
        with tempfile.TemporaryDirectory(prefix="polymargin-bench-") as d:
            write_shards(os.path.join(d, "train.shards"), X, y)
            return pm.LDMClassifier().fit(os.path.join(d, "train.shards"), data_name="a9a")

    child = None
    if BEFORE:
        env = dict(os.environ, PYTHONPATH=BEFORE)
        child = subprocess.Popen([sys.executable, "-c", CHILD, text], env=env, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert child.stdout.readline().strip() == "ready"

    def before():
        child.stdin.write("fit\n")
        child.stdin.flush()
        return float(child.stdout.readline())

    rows = {"cli": [], "memory": [], "shards": [], "before": []}
    for _ in range(REPEATS):
        rows["cli"].append(timed(lambda: subprocess.run(command, check=True, capture_output=True)))
        rows["memory"].append(timed(lambda: pm.LDMClassifier().fit(X, y)))
        rows["shards"].append(timed(through_shards))
        if child:
            rows["before"].append(before())
    if child:
        child.stdin.close()
        child.wait()

    # The same model every way (named as the command line names its data).
    with open(cli_model, "rb") as f:
        cli_bytes = f.read()
    if pm.LDMClassifier().fit(X, y, data_name="a9a").model_ != cli_bytes:
        raise SystemExit("the model fit in memory differs from the command line's")
    if through_shards().model_ != cli_bytes:
        raise SystemExit("the model fit through temporary shards differs from the command line's")

    names = {"cli": "polymargin train --algo ldm a9a.shards",
             "memory": "LDMClassifier().fit(X, y) (in memory)",
             "shards": "write_shards + fit(a9a.shards) (this build)",
             "before": "fit(X, y) before (temporary shards)"}
    base = statistics.median(rows["cli"])
    print(f"a9a: {X.shape[0]} rows, {X.shape[1]} features, {X.nnz} non-zeros; median of "
          f"{REPEATS}, interleaved; ratio: to the command line on shards")
    print(f"{'run':<46} {'seconds':>8} {'ratio':>6}")
    for key, name in names.items():
        if rows[key]:
            seconds = statistics.median(rows[key])
            print(f"{name:<46} {seconds:8.4f} {seconds / base:6.2f}")
    subprocess.run(["rm", "-rf", tmp], check=True)


if __name__ == "__main__":
    main()
