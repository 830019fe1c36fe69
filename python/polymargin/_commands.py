"""The polymargin commands run in this process, their stderr lines sent to logging."""

import json
import logging
import os

from . import _core

logger = logging.getLogger("polymargin")


def _log(line):
    logger.info("%s", line)


def _arg(value):
    if isinstance(value, bool):
        raise TypeError("a switch has no value")
    if isinstance(value, float):
        return repr(value)  # the shortest text that reads back as the same double
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


# The options of `train` that take several values.
_MULTI_VALUED = {"data", "validation", "unlabeled"}


def flag_args(params):
    """`--name value` for every parameter set (None: the command's default); True: `--name`."""
    args = []
    for name, value in params.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            if name not in _MULTI_VALUED:  # one value: the rest would be read as data files
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


def run_json(command, args):
    return json.loads(run(command, list(args) + ["--json"]))


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
