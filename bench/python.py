"""Fitting from Python against the command line and scikit-learn, on a9a (bundled), side by side.

usage: PYTHONPATH=build/python /usr/bin/python3 bench/python.py [BUILD] [REPEATS]

Each row is the median of REPEATS runs (default 7), all in this one run, the command line's and
Python's interleaved; the ratio column is against `polymargin train` on the same text file (its
whole command: process start, parse, train, write).
Python's rows time fit() on a CSR matrix already in memory (as from load_svmlight_file):
writing the temporary shards, training, reading the model back.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.linear_model import SGDClassifier
from sklearn.svm import LinearSVC

import polymargin as pm

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 7
BINARY = os.path.join(BUILD, "polymargin")


def median_seconds(fn):
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main():
    tmp = tempfile.mkdtemp(prefix="polymargin-bench-")
    text = {}
    for name in ("a9a", "a9a.t"):
        text[name] = os.path.join(tmp, name)
        with open(text[name], "wb") as f:
            subprocess.run(["zstd", "-dcq", os.path.join(ROOT, "data", name + ".zst")], stdout=f,
                           check=True)
    X, y = load_svmlight_file(text["a9a"], n_features=123)
    Xt, yt = load_svmlight_file(text["a9a.t"], n_features=123)
    model = os.path.join(tmp, "cli.model")

    rows = []
    for algo, cls in (("ldm", pm.LDMClassifier), ("svm", pm.LinearSVMClassifier),
                      ("cpm", pm.CPMClassifier)):
        # The two interleaved, so that a change of the machine's load hits both alike.
        cli_times, py_times = [], []
        for _ in range(REPEATS):
            start = time.perf_counter()
            subprocess.run([BINARY, "train", "--algo", algo, text["a9a"], "-o", model],
                           check=True, capture_output=True)
            cli_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            est = cls().fit(X, y)
            py_times.append(time.perf_counter() - start)
        cli_s, py_s = statistics.median(cli_times), statistics.median(py_times)
        rows.append((f"polymargin train --algo {algo} (text file)", cli_s,
                     pm.load(model).score(Xt, yt), cli_s))
        rows.append((f"polymargin {cls.__name__}.fit(CSR)", py_s, est.score(Xt, yt), cli_s))
        with open(model, "rb") as f:
            same = f.read() == cls().fit(X, y, data_name=text["a9a"]).model_
        if not same:
            raise SystemExit(f"{algo}: the Python model differs from the command line's")
    svm_s = rows[2][1]
    s, est = median_seconds(lambda: LinearSVC(C=1.0, dual=True, max_iter=5000).fit(X, y))
    rows.append(("scikit-learn LinearSVC(C=1)", s, est.score(Xt, yt), svm_s))
    s, est = median_seconds(lambda: SGDClassifier(loss="hinge", random_state=1).fit(X, y))
    rows.append(("scikit-learn SGDClassifier(hinge)", s, est.score(Xt, yt), svm_s))

    print(f"a9a: {X.shape[0]} rows, {X.shape[1]} features -> a9a.t {Xt.shape[0]} rows; "
          f"median of {REPEATS}; ratio: to the command line of the same learner (sklearn: "
          f"to polymargin svm)")
    print(f"{'run':<46} {'seconds':>8} {'ratio':>6} {'test acc':>8}")
    for name, seconds, acc, base in rows:
        print(f"{name:<46} {seconds:8.4f} {seconds / base:6.2f} {acc:8.4f}")
    subprocess.run(["rm", "-rf", tmp], check=True)


if __name__ == "__main__":
    np.random.seed(0)
    main()
