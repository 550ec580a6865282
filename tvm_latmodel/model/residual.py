"""The learned residual: XGBoost on features -> log(measured / analytical).

:class:`ResidualModel` is a scikit-learn-style estimator on plain arrays:
hyperparameters are keyword-only constructor arguments stored unchanged,
``fit`` returns ``self``, learned state ends with ``_``, ``predict`` on an
unfitted model raises. It persists as JSON metadata plus XGBoost's own JSON
model format, never pickle.

Objectives:

* ``"reg:squarederror"``: regress ``y = log(measured_s / analytical_s)``;
  the prediction is the log-correction itself, so the hybrid model also
  predicts absolute latency.
* ``"reg:headweighted"``: the same regression, each sample weighted by its
  normalised throughput within its task (``best_s / measured_s``, 1 for the
  fastest), as TVM's XGBModel weights its squared error: the error on the
  fast end counts most, which is where a search picks.
* ``"rank:pairwise"``: learn, within each task (group), a correction that
  orders candidates by measured latency, starting from the analytical order
  (``base_margin = -log(analytical_s)``). Its output is a log-correction of
  arbitrary offset per task: it ranks but does not give absolute times.
* ``"rank:ndcg"``: LambdaMART on NDCG with the top-k pair method, relevance
  ``floor(10 * best_s / measured_s)`` (0-10): only the order of the fast end
  matters. Same base margin and output as ``rank:pairwise``.
"""

from __future__ import annotations

import json
import os

import numpy as np

from .. import __version__
from ..fileformat import read_versioned_json
from .booster_check import check_xgboost_json

RESIDUAL_FORMAT = "tvm-latmodel-residual"
RESIDUAL_FORMAT_VERSION = 1
RESIDUAL_FIELDS = {"params!": dict, "n_features_in!": int, "n_samples!": int, "booster_file!": str, "extra": dict}
OBJECTIVES = ("reg:squarederror", "reg:headweighted", "rank:pairwise", "rank:ndcg")
_RANKING = ("rank:pairwise", "rank:ndcg")
#: The objective HybridCostModel uses unless told otherwise: chosen by
#: leave-one-family-out top-1, top-5 and trials over 13 families
#: (scripts/head_residual_study.py; BENCHMARKS.md), tied with rank:pairwise
#: but, as a regression, it still predicts absolute latency.
DEFAULT_OBJECTIVE = "reg:headweighted"


class ResidualModel:
    """XGBoost model of the analytical model's log error.

    Parameters
    ----------
    objective : {"reg:squarederror", "rank:pairwise"}
    n_estimators : int
        Boosting rounds.
    max_depth : int
    learning_rate : float
    min_child_weight : float
    subsample : float
    seed : int
        Seed of XGBoost's own sampling.
    nthread : int
        Threads XGBoost uses.
    """

    def __init__(self, *, objective: str = "reg:squarederror", n_estimators: int = 120, max_depth: int = 6,
                 learning_rate: float = 0.1, min_child_weight: float = 1.0, subsample: float = 1.0,
                 seed: int = 0, nthread: int = 1):
        self.objective = objective
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.seed = seed
        self.nthread = nthread

    # ---------------------------------------------------------------- fitting
    def _params(self) -> dict:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        objective = "reg:squarederror" if self.objective == "reg:headweighted" else self.objective
        return {"objective": objective, "max_depth": self.max_depth, "eta": self.learning_rate,
                "min_child_weight": self.min_child_weight, "subsample": self.subsample,
                "seed": self.seed, "nthread": self.nthread, "verbosity": 0}

    def fit(self, X, log_analytical_s, log_measured_s, groups=None) -> "ResidualModel":
        """Fit on features ``X`` (n, d), the analytical and measured log latencies.

        ``groups``: one task label per row; required by ``rank:pairwise``,
        which only compares candidates of the same task.
        """
        import xgboost as xgb

        X = np.asarray(X, dtype=np.float32)
        la = np.asarray(log_analytical_s, dtype=np.float64)
        lm = np.asarray(log_measured_s, dtype=np.float64)
        if X.ndim != 2 or len(X) != len(la) or len(la) != len(lm):
            raise ValueError(f"fit needs X (n, d) and two length-n arrays, got {X.shape}, {la.shape}, {lm.shape}")
        if len(X) == 0:
            raise ValueError("fit needs at least one sample")
        if not (np.all(np.isfinite(la)) and np.all(np.isfinite(lm))):
            raise ValueError("fit got non-finite latencies; filter failed measurements first")
        params = self._params()
        groups = np.zeros(len(X), dtype=np.int64) if groups is None else np.asarray(groups)
        if len(groups) != len(X):
            raise ValueError(f"fit got {len(groups)} group labels for {len(X)} samples")
        # measured throughput relative to the task's best (1 = the fastest)
        _, inverse = np.unique(groups, return_inverse=True)
        best = np.full(inverse.max() + 1, np.inf)
        np.minimum.at(best, inverse, lm)
        throughput = np.exp(best[inverse] - lm)
        if self.objective in _RANKING:
            order = np.argsort(groups, kind="stable")
            X, la, lm, groups, throughput = X[order], la[order], lm[order], groups[order], throughput[order]
            _, counts = np.unique(groups, return_counts=True)
            if self.objective == "rank:ndcg":
                label = np.floor(10 * throughput + 1e-9)
                params.update({"lambdarank_pair_method": "topk", "ndcg_exp_gain": True})
            else:
                label = -lm
            dtrain = xgb.DMatrix(X, label=label, base_margin=-la)
            dtrain.set_group(counts)
        else:
            weight = throughput if self.objective == "reg:headweighted" else None
            dtrain = xgb.DMatrix(X, label=lm - la, weight=weight)
            params["base_score"] = 0.0
        self.booster_ = xgb.train(params, dtrain, num_boost_round=self.n_estimators)
        self.n_features_in_ = int(X.shape[1])
        self.n_samples_ = int(len(X))
        return self

    def predict(self, X) -> np.ndarray:
        """Predicted ``log(measured / analytical)`` for each row of ``X``."""
        if not hasattr(self, "booster_"):
            raise RuntimeError("ResidualModel is not fitted: call fit() or load() first")
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"predict expects X with {self.n_features_in_} columns, got shape {X.shape}")
        if len(X) == 0:
            return np.zeros(0)
        # The raw margin, as predict(DMatrix(X), output_margin=True) gives it,
        # without building a DMatrix (the most of a predict's cost on a batch
        # of a search's size).
        raw = self.booster_.inplace_predict(X, predict_type="margin").astype(np.float64)
        # The ranking model scores -log(latency): flip to a log-correction.
        return -raw if self.objective in _RANKING else raw

    # ------------------------------------------------------------ persistence
    def save(self, path: str, extra: dict | None = None) -> None:
        """Write ``path`` (JSON metadata) and ``path + '.xgb.json'`` (the booster)."""
        if not hasattr(self, "booster_"):
            raise RuntimeError("cannot save an unfitted ResidualModel")
        booster_path = path + ".xgb.json"
        self.booster_.save_model(booster_path)
        meta = {"format": RESIDUAL_FORMAT, "format_version": RESIDUAL_FORMAT_VERSION,
                "package_version": __version__, "params": self.get_params(),
                "n_features_in": self.n_features_in_, "n_samples": self.n_samples_,
                "booster_file": os.path.basename(booster_path), "extra": extra or {}}
        with open(path, "w") as f:
            json.dump(meta, f, indent=1)

    @classmethod
    def load(cls, path: str) -> tuple["ResidualModel", dict]:
        """Read a model written by :meth:`save`; returns ``(model, extra)``.

        Raises
        ------
        ValueError
            The file is not JSON, not a residual model, from another format
            version, or its booster file is missing.
        """
        import xgboost as xgb

        meta = read_versioned_json(path, RESIDUAL_FORMAT, RESIDUAL_FORMAT_VERSION, "residual model",
                                   fields=RESIDUAL_FIELDS)
        if os.path.basename(meta["booster_file"]) != meta["booster_file"]:
            raise ValueError(f"{path}: booster_file {meta['booster_file']!r} is not a file name beside it")
        booster_path = os.path.join(os.path.dirname(os.path.abspath(path)), meta["booster_file"])
        if not os.path.isfile(booster_path):
            raise ValueError(f"{path}: its booster file {booster_path} is missing")
        check_xgboost_json(booster_path, num_features=meta["n_features_in"])
        try:
            model = cls(**meta["params"])
            booster = xgb.Booster()
            booster.load_model(booster_path)
            model.booster_ = booster
            model.n_features_in_ = int(meta["n_features_in"])
            model.n_samples_ = int(meta["n_samples"])
        except (KeyError, TypeError) as err:
            raise ValueError(f"{path}: bad residual model metadata: {err!r}") from None
        except (xgb.core.XGBoostError, RuntimeError, ValueError) as err:
            raise ValueError(f"{booster_path}: XGBoost cannot read it: {str(err).splitlines()[0]}") from None
        return model, meta.get("extra", {})

    def get_params(self) -> dict:
        return {"objective": self.objective, "n_estimators": self.n_estimators, "max_depth": self.max_depth,
                "learning_rate": self.learning_rate, "min_child_weight": self.min_child_weight,
                "subsample": self.subsample, "seed": self.seed, "nthread": self.nthread}
