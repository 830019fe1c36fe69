"""scikit-learn estimators over polymargin's learners.

Each estimator's parameters are the long flags of `polymargin train --algo NAME` (dashes become
underscores), taken from the options' one table (driver/options.h, through _core.train_options());
None leaves a flag at the command's default, so an estimator built with no arguments trains what
`polymargin train` trains. fit() trains that command's job in this process (the same options
parser, training library and model file); an in-memory matrix is handed to it as rows held in
memory (_core.Rows: the raw shards `train` would convert LIBSVM text into, a batch at a time, but
never written), so the model is the command line's on the same rows. Column j of a matrix is
feature j + 1 of LIBSVM's 1-based ids, as sklearn.datasets.load_svmlight_file reads them, so
models trained in Python and by the command line score the same files.
"""

import inspect
import json
import numbers
import os
import tempfile
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import _commands, _core

_MODEL_FILE = "model.pmm"


def _is_path(X):
    if isinstance(X, (str, os.PathLike)):
        return True
    return (isinstance(X, (list, tuple)) and len(X) > 0
            and all(isinstance(x, (str, os.PathLike)) for x in X))


def _check_sparse(X):
    """A CSR (or CSC) matrix's structure checked before any work, as scipy's
    check_format(full_check=True) checks it but naming the row and column: indptr of one entry
    more than the rows, from 0 to the non-zeros, never decreasing, and every column id within
    the matrix's width. An id past the width would widen the model (a fit on 13 columns with an
    id of 10^9 would size its weights for 10^9 features) and be scored against no column."""
    if not sp.issparse(X) or X.format not in ("csr", "csc"):
        return
    rows, columns = X.shape
    outer, inner = (rows, columns) if X.format == "csr" else (columns, rows)
    along, across = ("row", "column") if X.format == "csr" else ("column", "row")
    indptr, indices = np.asarray(X.indptr), np.asarray(X.indices)
    nnz = len(indices)
    where = f"X ({X.format} matrix {rows}x{columns})"
    if indptr.ndim != 1 or len(indptr) != outer + 1:
        raise ValueError(f"{where}: indptr has {len(indptr)} entries; {outer + 1} expected "
                         f"(one per {along}, and one)")
    if len(X.data) != nnz:
        raise ValueError(f"{where}: {len(X.data)} values for {nnz} {across} ids")
    if indptr[0] != 0 or indptr[-1] != nnz:
        raise ValueError(f"{where}: indptr runs from {indptr[0]} to {indptr[-1]}; from 0 to "
                         f"the {nnz} non-zeros expected")
    falls = np.flatnonzero(np.diff(indptr) < 0)
    if len(falls):
        r = int(falls[0])
        raise ValueError(f"{where}: indptr decreases at {along} {r} (from {indptr[r]} to "
                         f"{indptr[r + 1]})")
    if nnz and (indices.min() < 0 or indices.max() >= inner):
        k = int(np.flatnonzero((indices < 0) | (indices >= inner))[0])
        r = int(np.searchsorted(indptr, k, side="right")) - 1
        raise ValueError(f"{where}: {along} {r} has {across} id {indices[k]}, outside the "
                         f"matrix's {inner} {across}s (0 to {inner - 1})")


def _csr_parts(X):
    """indptr (int64), indices, data of a CSR matrix with sorted, unique column ids per row."""
    X = X.tocsr() if sp.issparse(X) else sp.csr_matrix(X)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()  # sorts the ids too
    indices = X.indices if X.indices.dtype in (np.int32, np.int64) else X.indices.astype(np.int64)
    data = X.data if X.data.dtype in (np.float32, np.float64) else X.data.astype(np.float64)
    return (np.ascontiguousarray(X.indptr, dtype=np.int64), np.ascontiguousarray(indices),
            np.ascontiguousarray(data))


def _engine_labels(classes):
    """The raw labels the engine stores for `classes` (float32): the classes themselves when they
    are numbers that float32 keeps apart, else their indices 0..k-1."""
    if classes.dtype.kind in "iuf":
        as_float = classes.astype(np.float32)
        if len(np.unique(as_float)) == len(classes) and np.all(np.isfinite(as_float)):
            return as_float
    return np.arange(len(classes), dtype=np.float32)


def _platt(scores, positive):
    """A and B of Platt's sigmoid P(positive | f) = 1 / (1 + exp(A f + B)) for decision values
    `scores` of rows whose class is `positive` (booleans): the maximum likelihood of Platt's
    smoothed targets ((N+ + 1)/(N+ + 2) for a positive row, 1/(N- + 2) for a negative one), by
    Newton's method with a backtracking line search, as Lin, Lin and Weng give it for LIBSVM."""
    f = np.asarray(scores, dtype=np.float64)
    n_pos = int(np.count_nonzero(positive))
    n_neg = len(f) - n_pos
    t = np.where(positive, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))

    def loss(a, b):  # -log likelihood: sum of log(1 + e^z) - (1 - t) z, z = A f + B
        z = a * f + b
        return float(np.sum(np.logaddexp(0.0, z) - (1.0 - t) * z))

    a, b = 0.0, float(np.log((n_neg + 1.0) / (n_pos + 1.0)))
    value = loss(a, b)
    for _ in range(100):
        p = expit(-(a * f + b))  # P(positive)
        gap = t - p  # d loss / dz
        grad_a, grad_b = float(np.dot(f, gap)), float(np.sum(gap))
        if abs(grad_a) < 1e-5 and abs(grad_b) < 1e-5:
            break
        w = p * (1.0 - p)
        h11, h22, h21 = float(np.dot(f * f, w)) + 1e-12, float(np.sum(w)) + 1e-12, float(
            np.dot(f, w))
        det = h11 * h22 - h21 * h21
        step_a = -(h22 * grad_a - h21 * grad_b) / det
        step_b = -(-h21 * grad_a + h11 * grad_b) / det
        slope = grad_a * step_a + grad_b * step_b
        size = 1.0
        while size >= 1e-10:
            trial = loss(a + size * step_a, b + size * step_b)
            if trial < value + 1e-4 * size * slope:
                a, b, value = a + size * step_a, b + size * step_b, trial
                break
            size /= 2
        else:
            break  # no step lowers the loss: at its minimum within rounding
    return a, b


def _labelled_rows(y):
    """The rows of a semi-supervised fit that have a class: y = -1 marks an unlabelled row, as in
    scikit-learn's semi-supervised estimators, where the other rows have two classes; y of two
    values, -1 among them, is two classes (a fit needs two classes besides the unlabelled rows,
    so -1 then cannot mean unlabelled)."""
    if y.dtype.kind not in "iuf":
        return np.ones(len(y), dtype=bool)
    unlabelled = y == -1
    if len(np.unique(y[~unlabelled])) < 2:
        return np.ones(len(y), dtype=bool)
    return ~unlabelled


def _check_calibration(classes, counts):
    """probability=True: a binary model, and rows enough of each class for two folds."""
    if classes != 2:
        raise ValueError(f"probability=True calibrates binary models; got {classes} classes")
    if counts.min() < 2:
        raise ValueError("probability=True needs at least 2 rows of each class (held-out "
                         "folds calibrate the probabilities)")


class _Matrix:
    """A matrix to train on: X, the label of each row and the threads of the fit."""

    def __init__(self, X, labels, threads, name):
        if threads is not None and (isinstance(threads, (bool, np.bool_))
                                    or not isinstance(threads, numbers.Integral)):
            raise TypeError(f"threads takes a whole number of threads (0: all cores), not "
                            f"{threads!r}")
        # A count train refuses is refused by train, with its message: the writer uses every
        # core.
        usable = threads is not None and 0 <= threads <= 1024
        self._threads = int(threads) if usable else 0
        self._parts = _csr_parts(X)
        self._labels = np.ascontiguousarray(labels, dtype=np.float64)
        # The model's features are the matrix's columns, zero last columns included: a model
        # saved and loaded takes the same X (n_features_in_).
        self._columns = X.shape[1]
        self._name = name

    def rows(self):
        """The rows held in memory, for _core.train(rows=...)."""
        return _core.Rows(*self._parts, self._labels, threads=self._threads,
                          columns=self._columns, name=self._name)


def _stored_label(value):
    """A label as a model file stores it (float32), as the text that wrote it read: the shortest
    decimal that float32 reads back to it (0.1, not 0.100000001490116)."""
    return float(str(np.float32(value)))


def _parameters(algo):
    """The estimator parameters of `algo`'s options in the option table, each with its default
    here: False for a switch (and warm_start, a switch here: start from the fitted model), else
    None (the command's default). An option with a scikit-learn name (C, n_jobs, random_state,
    tol) has it as a second parameter, also None, and probability (predict_proba) is the
    estimators' own."""
    params = {}
    for option in _commands.train_options():
        if option["estimator"] and algo in option["learners"]:
            name = option["key"].replace("-", "_")
            params[name] = False if option["switch"] or name == "warm_start" else None
            if option["alias"]:
                params[option["alias"]] = None
    params["probability"] = False
    return params


def _aliases(algo):
    """{scikit-learn's name: the option's parameter name} of `algo`'s options."""
    return {o["alias"]: o["key"].replace("-", "_") for o in _commands.train_options()
            if o["estimator"] and o["alias"] and algo in o["learners"]}


def _alias_value(alias, value):
    """A scikit-learn parameter's value as its option takes it: random_state an int (a
    RandomState or Generator draws one: the seed of the fit), n_jobs a thread count (None: the
    option's default; -1: all cores, -2: all but one, as joblib counts them)."""
    if alias == "random_state":
        if isinstance(value, (bool, np.bool_)):
            raise TypeError(f"random_state takes an int, a RandomState or None, not {value!r}")
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, np.random.Generator):
            return int(value.integers(2**31))
        return int(check_random_state(value).randint(2**31))
    if alias == "n_jobs" and isinstance(value, numbers.Integral) and not isinstance(
            value, (bool, np.bool_)) and value < 0:
        return 0 if value == -1 else max(1, (os.cpu_count() or 1) + 1 + int(value))
    return value


def _takes_options(cls):
    """Gives an estimator class the __init__ of its learner's options: keyword arguments only, kept
    as they are (as scikit-learn's get_params and clone expect), the signature listing them."""
    params = _parameters(cls._algo)

    def __init__(self, **kwargs):
        for name in kwargs:
            if name not in params:
                raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument "
                                f"{name!r}")
        for name, default in params.items():
            setattr(self, name, kwargs.get(name, default))

    kind = inspect.Parameter.KEYWORD_ONLY
    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] +
        [inspect.Parameter(name, kind, default=default) for name, default in params.items()])
    __init__.__qualname__ = f"{cls.__name__}.__init__"
    cls.__init__ = __init__
    return cls


class _Polymargin(ClassifierMixin, BaseEstimator):
    """What every estimator shares: fit through `polymargin train`, scoring through the model."""

    _algo = None  # --algo
    _binary_only = True
    _semi_supervised = False

    # ---- fitting

    def fit(self, X, y=None, *, data_name=None):
        """Trains on X (scipy.sparse matrix or dense array) with labels y, or on X = a path (or
        list of paths) to LIBSVM text or a shard directory, streamed as `polymargin train` reads
        it (y must then be None).

        data_name: what the model records as its training data (default: the paths given, or
        "<csr ROWSxCOLS>" for a matrix).
        """
        if not isinstance(self.probability, (bool, np.bool_)):
            raise TypeError(f"probability is True or False, not {self.probability!r}")
        for fitted in ("probA_", "probB_"):  # of an earlier fit with probability=True
            self.__dict__.pop(fitted, None)
        if _is_path(X):
            if y is not None:
                raise ValueError("y is given with data files: their labels are in the files")
            if self.probability:
                raise ValueError("probability=True calibrates on held-out folds of a matrix: "
                                 "fit on X and y (sklearn.datasets.load_svmlight_file reads a "
                                 "file)")
            paths = ([os.fspath(X)] if isinstance(X, (str, os.PathLike))
                     else [os.fspath(p) for p in X])
            with tempfile.TemporaryDirectory(prefix="polymargin-py-") as tmp:
                self._train(paths, data_name, tmp)
            self._describe_from_model()
            return self

        _check_sparse(X)
        X, y = self._validate_data(X, y, accept_sparse="csr", dtype=[np.float64, np.float32])
        labelled = np.ones(len(y), dtype=bool)
        if self._semi_supervised:
            labelled = _labelled_rows(y)
        check_classification_targets(y)
        classes, encoded = np.unique(y[labelled], return_inverse=True)
        if len(classes) < 2:
            unlabelled = " besides the unlabelled rows (y = -1)" if self._semi_supervised else ""
            raise ValueError(f"{type(self).__name__} needs rows of 2 classes{unlabelled}; got "
                             f"{len(classes)} class")
        if self._binary_only and len(classes) > 2:
            raise ValueError(f"{type(self).__name__} is a binary classifier; got "
                             f"{len(classes)} classes (CPMClassifier takes several)")
        labels = _engine_labels(classes)
        # The CMM reads a label 0 as unlabelled: classes stored as 0 (a class 0, or classes that
        # are not numbers) are trained as -1 and +1, the labels the model file then has. Other
        # classes are stored as they are, as `train --algo cmm` stores them.
        if self._semi_supervised and np.any(labels == 0):
            labels = np.array([-1.0, 1.0], dtype=np.float32)
        kind = "csr" if sp.issparse(X) else "dense"
        name = data_name or f"<{kind} {X.shape[0]}x{X.shape[1]}>"
        threads = self._option_params().get("threads")
        # Semi-supervised: an unlabelled row is labelled 0 in the shards, as `train --algo cmm`
        # reads it.
        row_labels = np.zeros(len(y), dtype=np.float64)
        row_labels[labelled] = labels[encoded]
        matrix = _Matrix(X, row_labels, threads, name)
        if self.probability:  # refused before any training
            _check_calibration(len(classes), np.unique(encoded, return_counts=True)[1])
        with tempfile.TemporaryDirectory(prefix="polymargin-py-") as tmp:
            self._train([], name, tmp, matrix)
        self.classes_ = classes
        self._labels = labels
        if self.probability:
            self._calibrate(X, y, labelled, data_name)
        return self

    def _calibrate(self, X, y, labelled, data_name):
        """probA_ and probB_ of predict_proba: Platt's sigmoid fitted to decision_function's
        values on held-out rows, as SVC(probability=True) does: 5 stratified folds (fewer when a
        class has fewer rows), each scored by the estimator fitted on the others."""
        counts = np.unique(y[labelled], return_counts=True)[1]
        folds = int(min(5, counts.min()))
        scores = np.zeros(len(y))
        fold_params = dict(probability=False)
        if "warm_start" in self.get_params(deep=False):
            fold_params["warm_start"] = False
        for train, held in StratifiedKFold(folds).split(np.zeros(len(y)), y):
            part = clone(self).set_params(**fold_params)
            part.fit(X[train], y[train], data_name=data_name)
            scores[held] = part.decision_function(X[held])
        positive = y[labelled] == self.classes_[1]
        self.probA_, self.probB_ = _platt(scores[labelled], positive)

    def _train(self, paths, data_name, tmp, matrix=None):
        """Trains on the files `paths`, or on `matrix` (a _Matrix) held in memory."""
        model = os.path.join(tmp, _MODEL_FILE)
        args = ["-o", model]
        if data_name:
            args += ["--data-name", data_name]
        params = self._option_params()
        warm = params.pop("warm_start", False)
        if not isinstance(warm, (bool, np.bool_)):
            raise TypeError(f"warm_start is a switch: True or False (got {warm!r})")
        if warm and "model_" in self.__dict__:  # train --warm-start from the fitted model
            start = os.path.join(tmp, "warm-start.pmm")
            with open(start, "wb") as f:
                f.write(self.model_)
            args += ["--warm-start", start]
        args += _commands.flag_args(params, self._switches() - {"warm_start"})
        # A fit is a job of the training library, on the matrix's rows in memory; a search
        # (tune=True) too: it writes its fold files from those rows.
        rows = matrix.rows() if matrix is not None else None
        args = ["--algo", self._algo] + list(paths) + args
        # The model file lies in the temporary directory `tmp`, read back below and removed with
        # it: written without fsync.
        run = _commands.tune if "--tune" in args else _commands.train
        self.train_report_ = run(args, rows, durable=False)
        with open(model, "rb") as f:
            self._set_model(f.read(), model)
        if self._algo in ("ldm", "svm"):  # scikit-learn's count of the epochs run (max_iter)
            self.n_iter_ = int(self.train_report_["epochs"])
        self._warn_unconverged()

    def _warn_unconverged(self):
        """ConvergenceWarning when the last epoch still lowered the objective by more than tol
        (the summary's `convergence`, which the linear learners report), or, with epochs="auto",
        when max_epochs ended the run, as scikit-learn's SGD estimators warn when max_iter ends
        their run."""
        auto = self.train_report_.get("epochs_auto")
        if auto:  # epochs="auto": warned only when max_epochs ended a run that judged epochs
            if not auto["stopped"] and auto["judged_from_epoch"] < auto["max_epochs"]:
                warnings.warn(
                    f"{type(self).__name__}: epochs='auto' ran to max_epochs "
                    f"({auto['max_epochs']}) without stopping; a larger max_epochs may give a "
                    "better model", ConvergenceWarning)
            return
        # The CPM reports its passes' convergence too, but its λ = 1/(C·T) moves with the steps
        # run, so more of them solve another problem: reported in train_report_, not warned.
        convergence = self.train_report_.get("convergence") or {}
        if self._algo in ("ldm", "svm") and convergence.get("converged") is False:
            warnings.warn(
                f"{type(self).__name__}: not converged: the last epoch still lowered the "
                f"objective by {100 * convergence['objective_gain']:.3g} % (tol "
                f"{100 * convergence['tol']:.3g} %); more epochs, or another eta0, may give a "
                "better model", ConvergenceWarning)

    def _option_params(self):
        """The parameters that are options of `train`, scikit-learn's names (C, n_jobs,
        random_state, tol) given as their options' (cost, threads, seed, tolerance); both names
        given different values is a ValueError."""
        params = self.get_params(deep=False)
        params.pop("probability")
        for alias, name in _aliases(self._algo).items():
            value = params.pop(alias)
            if value is None:
                continue
            value = _alias_value(alias, value)
            if params[name] is not None and params[name] != value:
                raise ValueError(f"{alias}={value!r} and {name}={params[name]!r} name one "
                                 f"parameter: give one of them")
            params[name] = value
        return params

    @classmethod
    def _switches(cls):
        """The parameters that are switches of `train` (False by default)."""
        return {name for name, p in inspect.signature(cls.__init__).parameters.items()
                if p.default is False} - {"probability"}

    def _describe_from_model(self):
        """n_features_in_ and classes_ as the model file has them (a model trained on files)."""
        info = self.model_info_
        self.n_features_in_ = int(info["features"])
        stored = (info["classes"] if info["classes"]
                  else [info["labels"]["negative"], info["labels"]["positive"]])
        self.classes_ = np.asarray([_stored_label(c) for c in stored], dtype=np.float64)
        self._labels = self.classes_.astype(np.float32)

    def _set_model(self, blob, path):
        self.model_ = blob
        self._engine = _core.Model(path)
        self.model_info_ = json.loads(self._engine.info())

    # ---- the model

    def _model(self):
        check_is_fitted(self, "model_")
        engine = self.__dict__.get("_engine")
        if engine is None:  # unpickled: the model's bytes only
            with tempfile.TemporaryDirectory(prefix="polymargin-py-") as tmp:
                path = os.path.join(tmp, _MODEL_FILE)
                with open(path, "wb") as f:
                    f.write(self.model_)
                engine = self._engine = _core.Model(path)
        return engine

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_engine", None)
        return state

    def _rows(self, X):
        check_is_fitted(self, "model_")
        if _is_path(X):
            raise TypeError("predict, decision_function and score take a matrix; for a file, "
                            "read it with sklearn.datasets.load_svmlight_file, or run "
                            "polymargin.run('eval', ...)")
        _check_sparse(X)
        X = self._validate_data(X, accept_sparse="csr", dtype=[np.float64, np.float32],
                                reset=False)
        indptr, indices, data = _csr_parts(X)
        return indptr, indices, data, X.shape[1]

    def _to_classes(self, raw):
        index = np.searchsorted(self._labels, raw.astype(np.float32))
        return self.classes_[np.clip(index, 0, len(self.classes_) - 1)]

    def _binary(self):
        """Whether the fitted model is binary (decision_function's scores are its own); an
        estimator not fitted yet has decision_function, as scikit-learn's have (a meta-estimator
        asks before it fits), and calling it raises NotFittedError."""
        return "model_" not in self.__dict__ or len(self.classes_) == 2

    def _calibrated(self):
        return self.probability and self._binary()

    @available_if(_binary)
    def decision_function(self, X):
        """f(x) of every row: > 0 predicts classes_[1] (binary models only)."""
        model = self._model()
        indptr, indices, data, columns = self._rows(X)
        scores, _ = model.score(indptr, indices, data, predict=False, columns=columns)
        return scores

    @available_if(_calibrated)
    def predict_proba(self, X):
        """P(class | x) of every row, a column per class of classes_: Platt's sigmoid of
        decision_function, fitted on held-out folds (probability=True, binary models). As with
        SVC, the class of the higher probability may differ from predict's where the score is
        near 0."""
        check_is_fitted(self, "probA_")
        positive = expit(-(self.probA_ * self.decision_function(X) + self.probB_))
        return np.column_stack([1 - positive, positive])

    @available_if(_calibrated)
    def predict_log_proba(self, X):
        """The log of predict_proba."""
        return np.log(self.predict_proba(X))

    def predict(self, X):
        model = self._model()
        indptr, indices, data, columns = self._rows(X)
        binary = len(self.classes_) == 2
        scores, raw = model.score(indptr, indices, data, predict=not binary, columns=columns)
        if binary:
            return self.classes_[(scores > 0).astype(int)]
        return self._to_classes(raw)

    def save(self, path):
        """Writes the model file (the CLI's format: `polymargin eval -m PATH` reads it)."""
        check_is_fitted(self, "model_")
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        fd, staged = tempfile.mkstemp(prefix=".polymargin-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(self.model_)
                f.flush()
                os.fsync(f.fileno())
            os.replace(staged, path)
        except BaseException:
            if os.path.exists(staged):
                os.unlink(staged)
            raise

    def _more_tags(self):
        return {"binary_only": self._binary_only}


class _Linear(_Polymargin):
    """coef_ and intercept_ of a linear model: decision_function(X) = X @ coef_.T + intercept_
    (the max-abs scaling folded in). Not for normalize="l2", whose score is not linear in x."""

    def _linear(self):
        linear = self._model().linear()
        if linear is None:
            raise AttributeError("coef_ and intercept_ exist for models without normalize='l2' "
                                 "only (the row's length divides the score)")
        return linear

    @property
    def coef_(self):
        weights, _ = self._linear()
        base = int(self.model_info_["index_base"])
        coef = np.zeros(self.n_features_in_)
        part = weights[base:base + self.n_features_in_]
        coef[:len(part)] = part
        return coef.reshape(1, -1)

    @property
    def intercept_(self):
        return np.array([self._linear()[1]])


@_takes_options
class LDMClassifier(_Linear):
    """The Large margin Distribution Machine, by averaged SGD (`polymargin train --algo ldm`).

    warm_start=True: a fit after the first starts from the fitted model (`train --warm-start`),
    as for LinearSVMClassifier."""

    _algo = "ldm"


@_takes_options
class LinearSVMClassifier(_Linear):
    """The linear SVM, the LDM with λ1 = λ2 = 0 (`polymargin train --algo svm`)."""

    _algo = "svm"


@_takes_options
class CPMClassifier(_Polymargin):
    """The Convex Polytope Machine, double-sided, one-vs-one over several classes
    (`polymargin train --algo cpm`). decision_function exists for binary models only."""

    _algo = "cpm"
    _binary_only = False


@_takes_options
class KernelLDMClassifier(_Polymargin):
    """The kernel LDM by dual coordinate descent (`polymargin train --algo kldm`; the data are
    held in memory: regular-scale sets)."""

    _algo = "kldm"


@_takes_options
class TwinLDMClassifier(_Polymargin):
    """The Twin LDM (`polymargin train --algo tldm`; data held in memory)."""

    _algo = "tldm"


@_takes_options
class CMMClassifier(_Polymargin):
    """The Compact Margin Machine, semi-supervised (`polymargin train --algo cmm`): rows labelled
    -1 are unlabelled, as in scikit-learn's semi-supervised estimators, and the other two labels
    are the classes; labels of two values only (-1 and 1, say) are two classes, every row
    labelled. Data held in memory."""

    _algo = "cmm"
    _semi_supervised = True


_BY_ALGORITHM = {c._algo: c for c in (LDMClassifier, LinearSVMClassifier, CPMClassifier,
                                      KernelLDMClassifier, TwinLDMClassifier, CMMClassifier)}


def load(path):
    """A fitted estimator of the model file at `path` (written by `polymargin train` or save()).

    Its parameters are the defaults; the settings it was trained with are in
    model_info_["config"]. classes_ are the labels the model stores.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        blob = f.read()
    engine = _core.Model(path)
    info = json.loads(engine.info())
    cls = _BY_ALGORITHM.get(info["algorithm"])
    if cls is None:
        raise ValueError(f"{path}: a model of algorithm '{info['algorithm']}', which has no "
                         "estimator")
    est = cls()
    est.model_ = blob
    est._engine = engine
    est.model_info_ = info
    est._describe_from_model()
    return est
