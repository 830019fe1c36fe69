"""polymargin: large-margin classifiers on sparse data that need not fit in memory.

scikit-learn estimators over the C++ engine of the `polymargin` command:

    LDMClassifier, LinearSVMClassifier, CPMClassifier      streamed (fit on a matrix or on shards)
    KernelLDMClassifier, TwinLDMClassifier, CMMClassifier  regular-scale data, held in memory

and the command line's model files and shard directories: load(), Estimator.save(), convert(),
load_svmlight() (LIBSVM text, compressed too, or shards, as a scipy matrix).
Progress is logged to the "polymargin" logger (INFO); errors raise ValueError (bad data or
settings), OSError (I/O), MemoryError, FloatingPointError (a numerical failure), and Ctrl-C while
training raises KeyboardInterrupt with nothing written.
"""

from ._commands import convert, load_svmlight, run
from ._estimators import (CMMClassifier, CPMClassifier, KernelLDMClassifier, LDMClassifier,
                          LinearSVMClassifier, TwinLDMClassifier, load)

__version__ = "0.1.0"


def _find_program():
    """The polymargin program (run('experiment', ...) starts it for its cells; fits and tune=True
    need none): $POLYMARGIN_BINARY, the build tree's (this package is build/python/polymargin),
    the installed one beside it (PREFIX/lib/python3*/*-packages/polymargin: PREFIX/bin), or the
    one on PATH."""
    import os
    import shutil
    from . import _core
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.environ.get("POLYMARGIN_BINARY"),
                 os.path.join(here, os.pardir, os.pardir, "polymargin"),
                 os.path.join(here, *[os.pardir] * 4, "bin", "polymargin"),
                 shutil.which("polymargin")):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            _core.set_program(os.path.abspath(path))
            return


_find_program()

__all__ = ["LDMClassifier", "LinearSVMClassifier", "CPMClassifier", "KernelLDMClassifier",
           "TwinLDMClassifier", "CMMClassifier", "load", "load_svmlight", "convert", "run"]
