"""The Python package: the same models as the command line, scikit-learn's conventions, errors."""

import json
import logging
import os
import signal
import threading
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler
from sklearn.utils.estimator_checks import check_estimator

import polymargin as pm
from conftest import ROOT, cli

STREAMED = {"ldm": pm.LDMClassifier, "svm": pm.LinearSVMClassifier, "cpm": pm.CPMClassifier}


# ---- the same model bytes as `polymargin train`

@pytest.mark.parametrize("algo", sorted(STREAMED))
def test_model_bytes_equal_the_cli(algo, a9a, a9a_files, tmp_path):
    X, y, _, _ = a9a
    cli_model = tmp_path / "cli.model"
    cli("train", "--algo", algo, a9a_files[0], "-o", cli_model, "--seed", 7)
    # From a CSR matrix, named as the command line names the file.
    est = STREAMED[algo](seed=7).fit(X, y, data_name=a9a_files[0])
    est.save(tmp_path / "py.model")
    assert (tmp_path / "py.model").read_bytes() == cli_model.read_bytes()
    # From the file itself, streamed.
    from_file = STREAMED[algo](seed=7).fit(a9a_files[0])
    assert from_file.model_ == cli_model.read_bytes()


@pytest.mark.parametrize("algo", ["ldm", "svm", "cpm", "kldm"])
def test_a_matrix_fits_in_memory_the_model_of_the_cli_on_its_shards(algo, a9a, tmp_path):
    # fit(X, y) hands the matrix's rows to the training library in memory, with no temporary
    # shard directory: the model is `polymargin train`'s on the shards written from the same
    # matrix, byte for byte.
    X, y, _, _ = a9a
    if algo == "kldm":  # the kernel learners hold m² doubles
        X, y = X[:1500], y[:1500]
    cls = pm.KernelLDMClassifier if algo == "kldm" else STREAMED[algo]
    tmp = os.environ.get("TMPDIR", "/tmp")

    def ours():
        return {p for p in os.listdir(tmp) if p.startswith("polymargin")}

    before = ours()
    written = []
    real_write = pm._core.write_shards
    pm._core.write_shards = lambda *a, **k: written.append(a) or real_write(*a, **k)
    try:
        est = cls(seed=5).fit(X, y, data_name="matrix")
    finally:
        pm._core.write_shards = real_write
    assert not written  # no shard directory was written
    assert ours() <= before
    indptr, indices, data = (np.asarray(a) for a in (X.indptr, X.indices, X.data))
    real_write(str(tmp_path / "X.shards"), indptr.astype(np.int64), indices, data,
               np.asarray(y, dtype=np.float64), columns=X.shape[1])
    cli("train", "--algo", algo, tmp_path / "X.shards", "-o", tmp_path / "cli.model", "--seed", 5,
        "--data-name", "matrix")
    assert est.model_ == (tmp_path / "cli.model").read_bytes()


def test_options_reach_the_command(a9a, a9a_files, tmp_path):
    X, y, _, _ = a9a
    cli_model = tmp_path / "cli.model"
    cli("train", a9a_files[0], "-o", cli_model, "-c", 0.5, "--epochs", 3, "--avg-start-epochs",
        1, "--normalize", "l2", "--lambda1-rel", 2e-4)
    est = pm.LDMClassifier(cost=0.5, epochs=3, avg_start_epochs=1, normalize="l2",
                           lambda1_rel=2e-4).fit(X, y, data_name=a9a_files[0])
    assert est.model_ == cli_model.read_bytes()
    other = pm.LDMClassifier(cost=0.25, epochs=3, avg_start_epochs=1, normalize="l2",
                             lambda1_rel=2e-4).fit(X, y, data_name=a9a_files[0])
    assert other.model_ != est.model_


@pytest.mark.parametrize("algo", ["ldm", "svm"])
def test_warm_start_continues_from_the_fitted_model(algo, a9a, a9a_files, tmp_path):
    X, y, Xt, yt = a9a
    est = STREAMED[algo](seed=3, epochs=2).fit(X, y, data_name=a9a_files[0])
    est.save(tmp_path / "first.model")
    cold = STREAMED[algo](seed=3, epochs=2).fit(Xt, yt, data_name=a9a_files[1]).model_
    # A second fit with warm_start=True is `train --warm-start` from the first fit's model.
    est.set_params(warm_start=True).fit(Xt, yt, data_name=a9a_files[1])
    cli_model = tmp_path / "cli.model"
    cli("train", "--algo", algo, a9a_files[1], "-o", cli_model, "--seed", 3, "--epochs", 2,
        "--warm-start", tmp_path / "first.model")
    # The same model but for the warm start's path (a temporary file here, recorded as "model").
    cli_est = pm.load(cli_model)
    warm, cli_warm = est.model_info_["config"].pop("warm_start"), \
        cli_est.model_info_["config"].pop("warm_start")
    assert warm.pop("model") != cli_warm.pop("model")
    assert warm == cli_warm
    assert est.model_info_ == cli_est.model_info_
    assert np.array_equal(est.decision_function(Xt), cli_est.decision_function(Xt))
    assert est.model_ != cold
    # The first fit of a warm_start estimator is a cold one.
    assert STREAMED[algo](seed=3, epochs=2, warm_start=True).fit(
        Xt, yt, data_name=a9a_files[1]).model_ == cold
    with pytest.raises(TypeError, match="warm_start is a switch"):
        STREAMED[algo](warm_start="yes").fit(X, y)
    # Other classes than the model's: train's refusal.
    with pytest.raises(ValueError, match="warm"):
        est.fit(X, np.where(y > 0, 2.0, 3.0))


def test_eval_and_load_agree_with_python(a9a, a9a_files, tmp_path):
    X, y, Xt, yt = a9a
    est = pm.LDMClassifier().fit(X, y)
    est.save(tmp_path / "m.model")
    report = json.loads(cli("eval", "-m", tmp_path / "m.model", "-d", a9a_files[1],
                            "--json").stdout)
    assert est.score(Xt, yt) == pytest.approx(report["accuracy"], abs=1e-12)
    assert est.score(Xt, yt) > 0.84
    # A model written by the command line, loaded in Python.
    cli("train", "--algo", "cpm", a9a_files[0], "-o", tmp_path / "cpm.model")
    loaded = pm.load(tmp_path / "cpm.model")
    assert isinstance(loaded, pm.CPMClassifier)
    report = json.loads(cli("eval", "-m", tmp_path / "cpm.model", "-d", a9a_files[1],
                            "--json").stdout)
    assert loaded.score(Xt, yt) == pytest.approx(report["accuracy"], abs=1e-12)
    np.testing.assert_array_equal(loaded.classes_, [-1.0, 1.0])


def test_saved_model_keeps_the_matrix_width(tmp_path):
    # The last column all zero: the model still has every column, so a loaded model takes X.
    rng = np.random.default_rng(0)
    X = rng.random((200, 10))
    X[:, 9] = 0
    y = np.where(X[:, 0] > 0.5, 1, -1)
    est = pm.LDMClassifier().fit(X, y)
    est.save(tmp_path / "w.model")
    loaded = pm.load(tmp_path / "w.model")
    assert loaded.n_features_in_ == 10
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


def test_shards_and_convert(a9a, a9a_files, tmp_path):
    X, y, Xt, yt = a9a
    summary = pm.convert(a9a_files[0], tmp_path / "a9a.shards", codec="zstd")
    assert summary["rows"] == 32561
    on_shards = pm.LDMClassifier().fit(str(tmp_path / "a9a.shards"), data_name="a9a")
    on_matrix = pm.LDMClassifier().fit(X, y, data_name="a9a")
    assert on_shards.model_ == on_matrix.model_
    assert on_shards.n_features_in_ == 123
    np.testing.assert_array_equal(on_shards.predict(Xt), on_matrix.predict(Xt))


def test_coef_and_intercept(a9a):
    X, y, Xt, _ = a9a
    for cls in (pm.LDMClassifier, pm.LinearSVMClassifier):
        est = cls().fit(X, y)
        assert est.coef_.shape == (1, 123)
        np.testing.assert_allclose(Xt @ est.coef_.ravel() + est.intercept_[0],
                                   est.decision_function(Xt), rtol=1e-9, atol=1e-9)
    normalised = pm.LDMClassifier(normalize="l2").fit(X, y)
    assert not hasattr(normalised, "coef_")
    assert not hasattr(pm.CPMClassifier().fit(X[:2000], y[:2000]), "coef_")


def test_sparse_and_dense_give_the_same_model(a9a):
    X, y, _, _ = a9a
    X, y = X[:3000], y[:3000]
    for cls in STREAMED.values():
        sparse = cls().fit(X, y, data_name="part")
        dense = cls().fit(X.toarray(), y, data_name="part")
        assert sparse.model_ == dense.model_
        csc = cls().fit(sp.csc_matrix(X), y, data_name="part")
        assert csc.model_ == sparse.model_


# ---- scikit-learn's conventions

# The CPM with --epochs given: at its defaults every fit of scikit-learn's tiny check sets runs
# the 50,000-step floor a side, a hundred fits that take minutes on a loaded machine; the
# conventions checked do not depend on the number of steps.
@pytest.mark.parametrize("make", [pm.LDMClassifier, pm.LinearSVMClassifier,
                                  lambda: pm.CPMClassifier(epochs=10), pm.KernelLDMClassifier,
                                  pm.TwinLDMClassifier, pm.CMMClassifier],
                         ids=["LDMClassifier", "LinearSVMClassifier", "CPMClassifier",
                              "KernelLDMClassifier", "TwinLDMClassifier", "CMMClassifier"])
def test_check_estimator(make):
    logging.getLogger("polymargin").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(make())  # raises on a failed check


def test_grid_search_and_pipeline(a9a):
    X, y, Xt, yt = a9a
    X, y = X[:4000], y[:4000]
    search = GridSearchCV(pm.LinearSVMClassifier(epochs=3, avg_start_epochs=1),
                          {"cost": [0.1, 1.0, 10.0]}, cv=3).fit(X, y)
    assert search.best_params_["cost"] in (0.1, 1.0, 10.0)
    assert search.score(Xt, yt) > 0.8
    pipe = make_pipeline(MaxAbsScaler(), pm.LDMClassifier(scale="none")).fit(X, y)
    assert pipe.score(Xt, yt) > 0.8


def test_string_and_multiclass_labels():
    X, y = make_classification(n_samples=600, n_features=8, n_informative=6, n_classes=3,
                               random_state=0)
    names = np.array(["ant", "bee", "cat"])[y]
    cpm = pm.CPMClassifier(cost=1.0).fit(X, names)
    assert list(cpm.classes_) == ["ant", "bee", "cat"]
    assert set(cpm.predict(X)) <= {"ant", "bee", "cat"}
    assert cpm.score(X, names) > 0.7
    assert not hasattr(cpm, "decision_function")  # one-vs-one: no per-class scores
    binary = pm.LDMClassifier().fit(X[y < 2], y[y < 2] + 5)  # labels 5 and 6
    np.testing.assert_array_equal(binary.classes_, [5, 6])
    assert binary.score(X[y < 2], y[y < 2] + 5) > 0.8
    assert ((binary.decision_function(X[y < 2]) > 0) == (binary.predict(X[y < 2]) == 6)).all()


def test_kernel_learners_and_semi_supervised(tmp_path):
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4, random_state=1)
    for cls in (pm.KernelLDMClassifier, pm.TwinLDMClassifier):
        est = cls().fit(X[:200], y[:200])
        assert est.score(X[200:], y[200:]) > 0.75, cls.__name__
    partly = y[:200].copy()
    partly[50:] = -1  # unlabelled, as scikit-learn's semi-supervised estimators mark them
    cmm = pm.CMMClassifier().fit(X[:200], partly)
    np.testing.assert_array_equal(cmm.classes_, [0, 1])
    assert cmm.score(X[200:], y[200:]) > 0.7
    assert cmm.model_info_["algorithm"] == "cmm"
    assert cmm.model_info_["config"]["unlabelled_rows"] == 150
    again = pm.CMMClassifier().fit(X[:200], partly)
    assert again.model_ == cmm.model_  # deterministic, whatever the temporary paths
    # Labels of two values, -1 among them, are two classes (scikit-learn's check_classifiers_classes
    # fits [-1, 1]): every row labelled, as the CMM with no unlabelled rows trains them.
    signs = np.where(y[:200] > 0, 1, -1)
    both = pm.CMMClassifier().fit(X[:200], signs)
    np.testing.assert_array_equal(both.classes_, [-1, 1])
    assert both.model_info_["config"]["unlabelled_rows"] == 0
    assert both.score(X[200:], np.where(y[200:] > 0, 1, -1)) > 0.7
    # Classes other than 0 are stored as they are, as `train --algo cmm` stores them: the saved
    # model loads with them (it had -1 and 1, and refused the data's labels).
    cmm12 = pm.CMMClassifier().fit(X[:200], np.where(partly == -1, -1, partly + 1))
    cmm12.save(tmp_path / "cmm12.model")
    back = pm.load(tmp_path / "cmm12.model")
    np.testing.assert_array_equal(back.classes_, [1, 2])
    np.testing.assert_array_equal(back.predict(X[200:]), cmm12.predict(X[200:]))
    assert back.score(X[200:], y[200:] + 1) == cmm12.score(X[200:], y[200:] + 1) > 0.7


def test_tune_chooses_and_records():
    X, y = make_classification(n_samples=1000, n_features=10, random_state=2)
    est = pm.LDMClassifier(tune=True, tune_folds=3, tune_budget=3).fit(X, y)
    record = est.model_info_["config"]["tune"]
    assert record["folds"] == 3 and len(record["settings"]) <= 3
    assert record["chosen"] in [s["setting"] for s in record["settings"]]
    assert est.train_report_["tune"] == record
    assert est.score(X, y) > 0.8


def test_a_matrix_tunes_in_memory_the_model_of_the_cli_on_its_shards(a9a, tmp_path):
    # tune=True is the library's search on the matrix's rows in memory (no shard directory of the
    # matrix, no command line): its choice and model are `polymargin train --tune`'s on the shards
    # written from the same matrix, byte for byte.
    X, y, _, _ = a9a
    X, y = X[:1200], y[:1200]
    written = []
    real_write = pm._core.write_shards
    pm._core.write_shards = lambda *a, **k: written.append(a) or real_write(*a, **k)
    try:
        est = pm.LinearSVMClassifier(tune=True, tune_folds=3, tune_repeats=1, tune_budget=4,
                                     epochs=3).fit(X, y, data_name="matrix")
    finally:
        pm._core.write_shards = real_write
    assert not written
    indptr, indices, data = (np.asarray(a) for a in (X.indptr, X.indices, X.data))
    real_write(str(tmp_path / "X.shards"), indptr.astype(np.int64), indices, data,
               np.asarray(y, dtype=np.float64), columns=X.shape[1])
    cli("train", "--algo", "svm", tmp_path / "X.shards", "-o", tmp_path / "cli.model", "--tune",
        "--tune-folds", 3, "--tune-repeats", 1, "--tune-budget", 4, "--epochs", 3,
        "--data-name", "matrix")
    assert est.model_ == (tmp_path / "cli.model").read_bytes()
    assert len(est.train_report_["tune"]["settings"]) == 4


def test_progress_is_logged(a9a, caplog):
    X, y, _, _ = a9a
    with caplog.at_level(logging.INFO, logger="polymargin"):
        pm.LDMClassifier(epochs=3, avg_start_epochs=1).fit(X[:5000], y[:5000])
    lines = [r.getMessage() for r in caplog.records if r.name == "polymargin"]
    assert any(line.startswith("epoch 3/3") for line in lines), lines


def test_an_unconverged_fit_warns_and_a_converged_one_does_not(a9a):
    X, y, _, _ = a9a
    with pytest.warns(ConvergenceWarning, match="not converged: the last epoch still lowered"):
        est = pm.LDMClassifier(epochs=2).fit(X, y)
    assert est.train_report_["convergence"]["converged"] is False
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = pm.LinearSVMClassifier(epochs=20).fit(X, y)
        assert est.train_report_["convergence"]["converged"] is True
        est = pm.LDMClassifier(epochs=2, tol=0.5).fit(X, y)
        assert est.train_report_["convergence"]["converged"] is True


def test_epochs_auto_stops_on_held_out_rows_and_warns_only_at_max_epochs(a9a):
    X, y, Xt, yt = a9a
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = pm.LinearSVMClassifier(epochs="auto").fit(X, y)
    auto = est.train_report_["epochs_auto"]
    assert auto["early_stopping"] and auto["stopped"] and auto["epochs_run"] < auto["max_epochs"]
    assert est.get_params()["epochs"] == "auto"
    assert est.score(Xt, yt) > 0.84
    with pytest.warns(ConvergenceWarning, match="ran to max_epochs"):
        est = pm.LDMClassifier(epochs="auto", max_epochs=4, n_iter_no_change=3,
                               validation_fraction=0.2).fit(X, y)
    assert est.train_report_["epochs_auto"]["epochs_run"] == 4
    # scikit-learn's name for the cap; a set under the step floor makes it without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = pm.LDMClassifier(epochs="auto", max_iter=7).fit(X[:500], y[:500])
    assert est.train_report_["epochs_auto"]["epochs_run"] == est.n_iter_ == 7
    assert not est.train_report_["epochs_auto"]["early_stopping"]
    with pytest.raises(ValueError, match="--validation-fraction must lie between 0 and 1"):
        pm.LDMClassifier(epochs="auto", validation_fraction=1.5).fit(X, y)


# ---- bad input

def test_bad_inputs_raise_clear_errors(a9a, tmp_path):
    X, y, _, _ = a9a
    X, y = X[:500], y[:500]
    with pytest.raises(ValueError, match="NaN"):
        pm.LDMClassifier().fit(np.array([[1.0, np.nan], [0.0, 1.0]]), [0, 1])
    # A float64 beyond float range is refused as the text parser refuses '1e300', not diverged on.
    with pytest.raises(ValueError, match="1e\\+300 is out of float range"):
        pm.LDMClassifier().fit(np.array([[1e300, 0.0], [-1e300, 1.0], [0.0, 1.0], [1.0, 0.0]]),
                               [1, -1, -1, 1])
    with pytest.raises(ValueError, match="cost takes one value, not list"):
        pm.LDMClassifier(cost=[0.1, 1]).fit(X, y)
    with pytest.raises(ValueError, match="1 class"):
        pm.LDMClassifier().fit(X, np.ones(500))
    with pytest.raises(ValueError, match="binary"):
        pm.LDMClassifier().fit(X, np.arange(500) % 3)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        pm.LDMClassifier().fit(X, y[:-1])
    est = pm.LDMClassifier().fit(X, y)
    with pytest.raises(ValueError, match="123 features"):
        est.predict(X[:, :100])
    # The command's own refusals, with the command's words.
    with pytest.raises(ValueError, match="--avg-start-epochs"):
        pm.LDMClassifier(epochs=2, avg_start_epochs=2).fit(X, y)
    # A short run without avg_start_epochs averages its last epoch.
    assert pm.LDMClassifier(epochs=1).fit(X, y).model_info_["config"]["avg_start_epochs"] == 0
    with pytest.raises(ValueError, match="--normalize must be l2 or none"):
        pm.LDMClassifier(normalize="l1").fit(X, y)
    # Column j is feature id j + 1, and ids go up to 2^32 - 2 (the linear learners' bias slot).
    wide = sp.csr_matrix(([1.0, 1.0], ([0, 1], [0, 2**32 - 2])), shape=(2, 2**32 - 1))
    with pytest.raises(ValueError, match="row 1: column 4294967294 is feature id 4294967295"):
        pm.CPMClassifier().fit(wide, [1, -1])
    bad = tmp_path / "bad.txt"
    bad.write_text("+1 1:1 2:1\n-1 3:x\n")
    with pytest.raises(ValueError, match=r"bad.txt:2"):
        pm.LDMClassifier().fit(str(bad))
    with pytest.raises(OSError, match="no-such-file"):
        pm.LDMClassifier().fit(str(tmp_path / "no-such-file"))
    with pytest.raises(OSError):
        est.save(tmp_path / "no-such-dir" / "m.model")
    with pytest.raises(ValueError, match="y is given"):
        pm.LDMClassifier().fit(str(bad), [1, -1])


ALL = (pm.LDMClassifier, pm.LinearSVMClassifier, pm.CPMClassifier, pm.KernelLDMClassifier,
       pm.TwinLDMClassifier, pm.CMMClassifier)


def _with_column(X, row, column):
    """A copy of the CSR matrix X whose row `row` has `column` as its last column id: scipy builds
    it (its check_format(full_check=True) refuses it), the ids of the row still increasing."""
    X = X.copy()
    X.indices[X.indptr[row + 1] - 1] = column
    return X


@pytest.mark.parametrize("cls", ALL)
def test_csr_structure_is_checked_before_any_work(cls):
    X, y = make_classification(n_samples=270, n_features=13, random_state=4)
    X = sp.csr_matrix(X)
    past = _with_column(X, 5, 500)
    message = r"row 5 has column id 500, outside the matrix's 13 columns"
    # fit on 13 columns with an id of 500 trained a model of 501 features; predict scored it.
    with pytest.raises(ValueError, match=message):
        cls().fit(past, y)
    est = cls().fit(X, y)
    assert est.n_features_in_ == 13 and est.model_info_["features"] == 13
    with pytest.raises(ValueError, match=message):
        est.predict(past)
    with pytest.raises(ValueError, match=message):
        est.decision_function(past)
    with pytest.raises(ValueError, match="row 7 has column id -1"):
        est.predict(_with_column(X, 7, -1))
    # An id of 10^9 is refused at once, not after sizing the weights for it.
    start = time.monotonic()
    with pytest.raises(ValueError, match="row 9 has column id 1000000000, outside"):
        cls().fit(_with_column(X, 9, 10**9), y)
    assert time.monotonic() - start < 5
    # indptr: never decreasing, from 0 to the non-zeros.
    falls = X.copy()
    falls.indptr[3] = falls.indptr[5]
    with pytest.raises(ValueError, match=r"indptr decreases at row 3 \(from \d+ to \d+\)"):
        cls().fit(falls, y)
    with pytest.raises(ValueError, match="indptr decreases at row 3"):
        est.predict(falls)
    short = X.copy()
    short.indptr[-1] -= 1
    with pytest.raises(ValueError, match=r"indptr runs from 0 to \d+; from 0 to the \d+ non-zeros"):
        est.predict(short)
    # The same checks in the C++ reader of the rows, which the package calls.
    with pytest.raises(ValueError, match="indptr decreases at row 1"):
        est._model().score(np.array([0, 3, 1], dtype=np.int64), np.array([0], dtype=np.int32),
                           np.array([1.0]))
    with pytest.raises(ValueError, match="row 0 has column id 13, outside the matrix's 13 columns"):
        est._model().score(np.array([0, 1], dtype=np.int64), np.array([13], dtype=np.int32),
                           np.array([1.0]), columns=13)
    # The same matrix as CSC: its own structure is checked (column and row swap places).
    csc = X.tocsc()
    csc.indices[csc.indptr[2] - 1] = 300
    with pytest.raises(ValueError, match="column 1 has row id 300, outside the matrix's 270 rows"):
        est.predict(csc)


def test_switches_take_booleans_and_other_parameters_do_not(a9a):
    X, y, _, _ = a9a
    X, y = X[:300], y[:300]
    # bias=False once trained with the default bias of 1, and bias=True swallowed the next flag.
    for bad in (dict(bias=False), dict(bias=True), dict(scale=False), dict(normalize=np.True_)):
        with pytest.raises(TypeError, match=f"{next(iter(bad))} takes a value"):
            pm.LDMClassifier(**bad).fit(X, y)
    # A numpy bool is a switch's True; 1 or "yes" would have been read as a data file.
    shrinking = pm.KernelLDMClassifier(no_shrinking=True).fit(X, y)
    assert pm.KernelLDMClassifier(no_shrinking=np.True_).fit(X, y).model_ == shrinking.model_
    assert pm.KernelLDMClassifier(no_shrinking=np.False_).fit(X, y).model_ != shrinking.model_
    for bad in (1, "yes"):
        with pytest.raises(TypeError, match="no_shrinking is a switch"):
            pm.KernelLDMClassifier(no_shrinking=bad).fit(X, y)
    with pytest.raises(TypeError, match="threads takes a whole number"):
        pm.LDMClassifier(threads="abc").fit(X, y)
    with pytest.raises(ValueError, match="--threads"):  # train's own rule and message
        pm.LDMClassifier(threads=2**31).fit(X, y)


def test_labels_read_from_a_file_are_the_files_labels(tmp_path):
    from sklearn.datasets import dump_svmlight_file, load_svmlight_file
    X, y = make_classification(n_samples=300, n_features=6, random_state=3)
    labels = np.where(y > 0, 0.2, 0.1)  # float32 stores neither exactly
    dump_svmlight_file(X, labels, tmp_path / "d.svm", zero_based=False)
    Xf, yf = load_svmlight_file(str(tmp_path / "d.svm"), n_features=6)
    cli("train", tmp_path / "d.svm", "-o", tmp_path / "m.model")
    for est in (pm.LDMClassifier().fit(str(tmp_path / "d.svm")), pm.load(tmp_path / "m.model")):
        assert est.classes_.tolist() == [0.1, 0.2]
        assert np.mean(est.predict(Xf) == yf) > 0.8


def test_tuning_needs_no_program(tmp_path):
    # A copy of the package away from the build tree, with no polymargin on PATH: the search's
    # cells are jobs of the training library in this process.
    import shutil
    import subprocess
    import sys
    shutil.copytree(os.path.dirname(pm.__file__), tmp_path / "polymargin")
    env = {k: v for k, v in os.environ.items() if k != "POLYMARGIN_BINARY"}
    env.update(PYTHONPATH=str(tmp_path), PATH="/usr/bin:/bin")
    code = ("import numpy as np, polymargin as pm\n"
            "X = np.random.default_rng(1).normal(size=(60, 3)); y = (X[:, 0] > 0).astype(int)\n"
            "est = pm.LDMClassifier(tune=True, tune_budget=2).fit(X, y)\n"
            "print('chosen', est.train_report_['tune']['chosen'])\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0 and "chosen {" in out.stdout, out.stdout + out.stderr


def test_fits_in_threads_give_the_models_of_fits_in_turn(a9a):
    # Four fits at once in one process (the GIL released, nothing of the process swapped or
    # locked): the models of the same four fits one after the other.
    X, y, _, _ = a9a
    X, y = X[:8000], y[:8000]
    makes = [lambda: pm.LDMClassifier(seed=1, epochs=3),
             lambda: pm.LinearSVMClassifier(seed=2, epochs=3, cost=0.5),
             lambda: pm.CPMClassifier(seed=3, epochs=2, faces=4),
             lambda: pm.LDMClassifier(seed=4, epochs=3, workers=2)]
    in_turn = [make().fit(X, y).model_ for make in makes]
    at_once = [None] * len(makes)
    errors = []

    def fit(i):
        try:
            at_once[i] = makes[i]().fit(X, y).model_
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=fit, args=(i,)) for i in range(len(makes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert at_once == in_turn


def test_unfitted_and_path_arguments_say_so(a9a, tmp_path):
    from sklearn.exceptions import NotFittedError
    X, y, _, _ = a9a
    with pytest.raises(NotFittedError):
        pm.LDMClassifier().decision_function(X)
    est = pm.LDMClassifier().fit(X[:300], y[:300])
    with pytest.raises(TypeError, match="take a matrix"):
        est.predict(str(tmp_path / "d.svm"))
    with pytest.raises(ValueError, match="2 classes besides the unlabelled rows"):
        pm.CMMClassifier().fit(X[:300], np.ones(300))


def fit_interrupted(est, X, y):
    """est.fit(X, y) with a SIGINT (Ctrl-C) 0.5 s in, which must raise KeyboardInterrupt; the
    seconds the fit took."""
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            est.fit(X, y)
    finally:
        timer.cancel()
    assert not hasattr(est, "model_")
    return time.monotonic() - start


def test_ctrl_c_stops_training_and_writes_nothing(a9a, tmp_path):
    X, y, _, _ = a9a
    tmp = os.environ.get("TMPDIR", "/tmp")
    before = {p for p in os.listdir(tmp) if p.startswith("polymargin-py-")}
    fit_interrupted(pm.LDMClassifier(epochs=20000, avg_start_epochs=1), X, y)
    after = {p for p in os.listdir(tmp) if p.startswith("polymargin-py-")}
    assert after <= before  # the temporary shards and model are gone
    # Python's own handler is back: a later Ctrl-C is a plain KeyboardInterrupt.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_stops_the_kernel_learners_at_their_next_sweep(a9a):
    # Each would sweep for hours toward a tolerance it never reaches; the solvers poll the stop
    # once a sweep.
    X, y, _, _ = a9a
    X, y = X[:1500], y[:1500]
    unlabelled = np.where(y > 0, 1, 0)
    unlabelled[::3] = -1
    never = dict(tolerance=1e-300, max_sweeps=100000000)
    for est, labels in ((pm.KernelLDMClassifier(**never), y), (pm.TwinLDMClassifier(**never), y),
                        (pm.CMMClassifier(**never, max_rounds=1000), unlabelled)):
        assert fit_interrupted(est, X, labels) < 15, type(est).__name__


def test_ctrl_c_stops_kernel_ldm_in_its_set_up(a9a):
    # On 5,000 rows the set-up (the kernel matrix, the Cholesky factor of a 5,000 × 5,000 matrix,
    # the solves) takes 10-40 s; it polls the stop between pieces of about a second of work
    # (issue 46, item 4: Ctrl-C at 4 s raised KeyboardInterrupt 19-30 s later).
    X, y, _, _ = a9a
    assert fit_interrupted(pm.KernelLDMClassifier(), X[:5000], y[:5000]) < 5


def test_ctrl_c_stops_a_tuning_search_at_once(a9a):
    # 375 cells (15 settings, 5 folds, 5 repeats) would take tens of seconds: Ctrl-C stops the
    # running cells and starts no other.
    X, y, _, _ = a9a
    assert fit_interrupted(pm.LDMClassifier(tune=True, tune_repeats=5), X, y) < 10


def test_the_gil_is_released_while_training(a9a):
    X, y, _, _ = a9a
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        import time
        start = time.perf_counter()
        pm.LDMClassifier(epochs=300, avg_start_epochs=1).fit(X, y)
        seconds = time.perf_counter() - start
        count = len(ticks)
    finally:
        done.set()
        ticker.join()
    # A thread that held the GIL for the whole fit would leave the ticker at one or two ticks.
    assert seconds < 0.05 or count >= 10, (seconds, count)


# ---- scikit-learn's names, decision_function before fitting, predict_proba

@pytest.mark.parametrize("cls", ALL)
def test_scikit_learns_names_train_the_model_of_the_options(cls):
    X, y = make_classification(n_samples=300, n_features=8, random_state=6)
    cost = "c1" if cls is pm.CMMClassifier else "cost"
    tol = "tol" if cls in (pm.LDMClassifier, pm.LinearSVMClassifier, pm.CPMClassifier) \
        else "tolerance"
    named = {cost: 2.0, "seed": 3, "threads": 1}
    sklearn_named = {"C": 2.0, "random_state": 3, "n_jobs": 1}
    if tol == "tolerance":
        named[tol] = sklearn_named["tol"] = 0.005
    assert cls(**sklearn_named).fit(X, y).model_ == cls(**named).fit(X, y).model_
    assert set(sklearn_named) <= set(cls().get_params())
    # A RandomState draws the fit's seed (check_estimator's set_random_state gives 0).
    assert cls(random_state=np.random.RandomState(0)).fit(X, y).model_ == \
        cls(random_state=np.random.RandomState(0)).fit(X, y).model_
    with pytest.raises(ValueError, match=f"C=2.0 and {cost}=3.0 name one parameter"):
        cls(C=2.0, **{cost: 3.0}).fit(X, y)
    assert cls(C=2.0, **{cost: 2.0}).fit(X, y).model_ == cls(C=2.0).fit(X, y).model_
    search = GridSearchCV(cls(), {"C": [0.5, 2.0]}, cv=2).fit(X, y)
    assert search.best_params_["C"] in (0.5, 2.0)


def test_n_jobs_counts_cores_as_joblib_does(monkeypatch):
    from polymargin._estimators import _alias_value
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert _alias_value("n_jobs", -1) == 0  # all cores: --threads 0
    assert _alias_value("n_jobs", -2) == 7
    assert _alias_value("n_jobs", -20) == 1
    assert _alias_value("n_jobs", 3) == 3
    with pytest.raises(TypeError, match="random_state takes an int"):
        _alias_value("random_state", True)


def test_decision_function_is_there_before_fitting():
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import StackingClassifier
    from sklearn.exceptions import NotFittedError
    from sklearn.linear_model import LogisticRegression
    X, y = make_classification(n_samples=400, n_features=8, random_state=7)
    for cls in ALL:
        assert hasattr(cls(), "decision_function"), cls.__name__
        with pytest.raises(NotFittedError):
            cls().decision_function(X)
    # Meta-estimators that ask before they fit: calibration on the scores, and stacking that uses
    # them (it fell back to predict's labels).
    calibrated = CalibratedClassifierCV(pm.LDMClassifier(), cv=3).fit(X, y)
    assert calibrated.predict_proba(X).shape == (400, 2)
    stack = StackingClassifier([("ldm", pm.LDMClassifier()), ("svm", pm.LinearSVMClassifier())],
                               final_estimator=LogisticRegression(), cv=3).fit(X, y)
    assert stack.stack_method_ == ["decision_function", "decision_function"]
    assert stack.score(X, y) > 0.8


@pytest.mark.parametrize("cls", [pm.LDMClassifier, pm.KernelLDMClassifier])
def test_predict_proba_is_platts_sigmoid_on_held_out_folds(cls):
    from sklearn.calibration import CalibratedClassifierCV
    X, y = make_classification(n_samples=500, n_features=10, flip_y=0.1, random_state=8)
    names = np.array(["no", "yes"])[y]
    assert not hasattr(cls(), "predict_proba")  # probability=False, as SVC's default
    est = cls(probability=True).fit(X, names)
    proba = est.predict_proba(X)
    assert proba.shape == (500, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1)
    # A monotone function of the score: P(yes) grows with decision_function.
    order = np.argsort(est.decision_function(X))
    assert (np.diff(proba[order, 1]) >= 0).all()
    np.testing.assert_allclose(est.predict_log_proba(X), np.log(proba))
    # scikit-learn's sigmoid calibration of the same scores, on the same 5 stratified folds,
    # with the estimator refitted on every row: the same probabilities.
    sklearn = CalibratedClassifierCV(cls(), method="sigmoid", cv=5, ensemble=False).fit(X, names)
    np.testing.assert_allclose(proba, sklearn.predict_proba(X), atol=2e-3)
    # The model is the one probability=False trains; the folds only place the sigmoid.
    assert est.model_ == cls().fit(X, names).model_
    assert est.probA_ < 0  # P(yes) rises with the score


def test_predict_proba_refuses_what_it_cannot_calibrate(a9a_files):
    X, y = make_classification(n_samples=300, n_features=8, n_classes=3, n_informative=5,
                               random_state=9)
    with pytest.raises(ValueError, match="calibrates binary models; got 3 classes"):
        pm.CPMClassifier(probability=True).fit(X, y)
    with pytest.raises(ValueError, match="held-out folds of a matrix"):
        pm.LDMClassifier(probability=True).fit(a9a_files[0])
    with pytest.raises(ValueError, match="at least 2 rows of each class"):
        pm.LDMClassifier(probability=True).fit(X[:20], np.r_[np.zeros(19), 1])
    with pytest.raises(TypeError, match="probability is True or False"):
        pm.LDMClassifier(probability="yes").fit(X, y > 0)


def test_load_svmlight_reads_what_polymargin_reads(a9a, a9a_files, tmp_path):
    # The bundled zstd file, which scikit-learn's load_svmlight_file cannot read, gives its
    # matrix: the same rows, values and labels.
    X, y, _, _ = a9a
    from_zstd, labels = pm.load_svmlight(os.path.join(ROOT, "data", "a9a.zst"))
    assert from_zstd.shape == X.shape and from_zstd.dtype == np.float64
    assert (from_zstd != X).nnz == 0
    np.testing.assert_array_equal(labels, y)
    test, _ = pm.load_svmlight(os.path.join(ROOT, "data", "a9a.t.zst"), n_features=123)
    assert test.shape[1] == 123
    with pytest.raises(ValueError, match="n_features=100: the data has 123 features"):
        pm.load_svmlight(a9a_files[0], n_features=100)
    # A shard directory reads the same, and a fit on the matrix is the command line's model.
    cli("convert", a9a_files[0], "-o", tmp_path / "a9a.shards")
    shards, shard_labels = pm.load_svmlight(tmp_path / "a9a.shards")
    assert (shards != from_zstd).nnz == 0
    np.testing.assert_array_equal(shard_labels, labels)
    cli("train", a9a_files[0], "-o", tmp_path / "cli.model")
    fitted = pm.LDMClassifier().fit(from_zstd, labels, data_name=a9a_files[0])
    assert fitted.model_ == (tmp_path / "cli.model").read_bytes()
    # Bad text is refused naming file and line, as the command line refuses it.
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:0.5\n-1 2:x\n")
    with pytest.raises(ValueError, match=r"bad.svm:2"):
        pm.load_svmlight(bad)
