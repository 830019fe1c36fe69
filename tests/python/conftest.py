import os
import subprocess

import pytest
from sklearn.datasets import load_svmlight_file

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
BINARY = os.environ.get("POLYMARGIN_BINARY", os.path.join(ROOT, "build", "polymargin"))


def cli(*args, check=True):
    """`polymargin ARGS...` as a separate process."""
    return subprocess.run([BINARY] + [str(a) for a in args], capture_output=True, text=True,
                          check=check)


@pytest.fixture(scope="session")
def a9a_files(tmp_path_factory):
    """The bundled a9a (train, test) as LIBSVM text files."""
    d = tmp_path_factory.mktemp("a9a")
    paths = []
    for name in ("a9a", "a9a.t"):
        out = d / name
        with open(out, "wb") as f:
            subprocess.run(["zstd", "-dcq", os.path.join(ROOT, "data", name + ".zst")], stdout=f,
                           check=True)
        paths.append(str(out))
    return paths


@pytest.fixture(scope="session")
def a9a(a9a_files):
    """(X, y, X_test, y_test) of a9a: CSR matrices, column j = feature j + 1."""
    X, y = load_svmlight_file(a9a_files[0], n_features=123)
    Xt, yt = load_svmlight_file(a9a_files[1], n_features=123)
    return X, y, Xt, yt
