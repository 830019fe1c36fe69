"""The polymargin commands run in this process, their stderr lines sent to logging."""

import json
import logging
import os

import numpy as np

from . import _core

logger = logging.getLogger("polymargin")


def _log(line):
    logger.info("%s", line)


def _arg(value):
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("a switch has no value")
    if isinstance(value, float):
        return repr(value)  # the shortest text that reads back as the same double
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


_OPTIONS = None


def train_options():
    """The options of `polymargin train`, from the option table (driver/options.h): a list of
    dicts with key, learners, switch, several (takes several values), default, help, estimator."""
    global _OPTIONS
    if _OPTIONS is None:
        _OPTIONS = json.loads(_core.train_options())
    return _OPTIONS


def _takes_several(name):
    return any(o["several"] and o["key"] == name.replace("_", "-") for o in train_options())


def flag_args(params, switches=()):
    """`--name value` for every parameter set (None: the command's default); a switch (a name in
    `switches`) is True (`--name`) or False (left out), and only switches take True or False."""
    args = []
    for name, value in params.items():
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        is_bool = isinstance(value, (bool, np.bool_))
        if name in switches:
            if not is_bool:
                raise TypeError(f"{name} is a switch: True or False (got {value!r})")
            if value:
                args.append(flag)
        elif is_bool:
            hint = " (0: none, 1: a constant feature of 1)" if name == "bias" else ""
            raise TypeError(f"{name} takes a value, as {flag} does, not {value!r}{hint}")
        elif isinstance(value, (list, tuple)):
            if not _takes_several(name):  # one value: the rest would be read as data files
                raise ValueError(
                    f"{name} takes one value, not {type(value).__name__} {list(value)!r} "
                    "(to search values, use tune=True or GridSearchCV)")
            args += [flag] + [_arg(v) for v in value]
        else:
            args += [flag, _arg(value)]
    return args


def run(command, args):
    """Runs `polymargin COMMAND ARGS...` in this process and returns what it printed on stdout.

    Errors raise what the command's exit code says: ValueError (usage, data: 2, 3), OSError (4),
    FloatingPointError (5), MemoryError (7), KeyboardInterrupt (Ctrl-C while training).
    """
    _, out = _core.run(command, [_arg(a) for a in args], _log)
    return out.decode()


def train(args, rows=None, durable=True):
    """The job of `polymargin train ARGS` (without --tune) trained in this process by the training
    library, with the GIL released: several may run at once in threads. Its data are the files
    ARGS names, or `rows` (a _core.Rows: a matrix's rows held in memory); durable=False writes
    the model without fsync (a temporary file, read back at once). Returns its summary (what
    `train --json` prints) as a dict. Errors raise as run() says.
    """
    return json.loads(_core.train([_arg(a) for a in args], _log, rows, durable))


def tune(args, rows=None, durable=True):
    """The search and final run of `polymargin train --tune ARGS`, in this process by the training
    library (no executable), with the GIL released; data and durable as train() takes them.
    Returns the final run's summary (what `train --tune --json` prints) as a dict."""
    return json.loads(_core.tune([_arg(a) for a in args], _log, rows, durable))


def run_json(command, args):
    return json.loads(run(command, list(args) + ["--json"]))


def load_svmlight(paths, n_features=None, *, dtype=np.float64, threads=0):
    """(X, y) of LIBSVM/SVMlight text (plain, gzip, bzip2 or zstd) or of a shard directory, read
    by polymargin's reader, in the data's order: X a scipy CSR matrix whose column j is feature
    j + 1 of 1-based ids (feature j of 0-based ones), y the labels. Values and labels are what
    polymargin trains on (float32, here as `dtype`), so a fit on X, y trains the model of
    `polymargin train` on the same file. n_features: at least this many columns (a test set's
    width to match its training set's); fewer than the data has is a ValueError."""
    import scipy.sparse as sp
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    indptr, columns, values, labels, features, _ = _core.read_rows(
        [os.fspath(p) for p in paths], threads)
    width = int(features)
    if n_features is not None:
        if n_features < width:
            raise ValueError(f"n_features={n_features}: the data has {width} features")
        width = int(n_features)
    X = sp.csr_matrix((values.astype(dtype), columns, indptr), shape=(len(labels), width))
    return X, labels.astype(np.float64)


def convert(inputs, output, *, codec=None, block_rows=None, shards=None, index_base=None,
            max_bad_lines=None, threads=None, zstd_level=None):
    """`polymargin convert`: LIBSVM text (plain, gzip, bzip2, zstd) into a shard directory.

    Returns the summary (rows, features, non-zeros, ...) as a dict.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    args = [os.fspath(p) for p in inputs] + ["-o", os.fspath(output)]
    args += flag_args(dict(codec=codec, block_rows=block_rows, shards=shards,
                           index_base=index_base, max_bad_lines=max_bad_lines, threads=threads,
                           zstd_level=zstd_level))
    return run_json("convert", args)
