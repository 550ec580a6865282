"""HybridCostModel: the analytical modes times a learned residual, as a
MetaSchedule cost model.

``predicted_latency = analytical_latency * exp(weight * residual)``, and the
score MetaSchedule sees is ``roofline_bound / predicted_latency`` (higher is
faster, comparable across calls because the bound is fixed per workload).

* From zero measurements it ranks by the analytical model alone.
* After ``min_samples`` valid measurements of a task the residual (an
  XGBoost model over TVM's per-store features and the analytical terms)
  switches on; it is refitted when the data grew by ``refit_growth`` since
  the last fit, and its weight ``n / (n + evidence_half)`` grows with the
  number ``n`` of measurements.
* Failed builds or runs (an error, no ``run_secs``, MetaSchedule's ``1e10``
  sentinel, a non-finite or non-positive time) are never fitted; they are
  counted in ``failed_count_``.
* A pretrained residual (``tvm-latmodel train``) starts the model; its
  correction is damped by ``pretrained_weight`` and the task's own residual
  learns what it gets wrong.
* If anything in the model raises during tuning, ``predict`` falls back to
  the analytical score, then to seeded random scores, with one warning each;
  ``update`` logs and skips. Tuning never crashes because of the model.
"""

from __future__ import annotations

import json
import math
import os
import warnings

import numpy as np
import tvm
from tvm.s_tir import meta_schedule as ms

from .. import __version__
from ..fileformat import read_versioned_json
from ..hardware import HardwareSpec
from ..latency import valid_latency
from .modes import estimate
from .program import summarize
from .residual import ResidualModel

MODEL_FORMAT = "tvm-latmodel-hybrid"
MODEL_FORMAT_VERSION = 1

ANALYTICAL_FEATURES = ("log_latency_s", "log_compute_s", "log_memory_s", "log_overhead_s", "log_waves",
                       "wave_efficiency", "lane_efficiency", "padded_work_ratio", "memory_bound_fraction",
                       "regions", "log_units", "roofline_fraction")


def analytical_features(terms: dict) -> list[float]:
    """The analytical terms as residual features (logs of times and counts)."""
    lg = lambda x: math.log(max(float(x), 1e-12))  # noqa: E731
    return [lg(terms["latency_s"]), lg(terms["compute_s"]), lg(terms["memory_s"]), lg(terms["overhead_s"]),
            math.log1p(terms["waves"]), terms["wave_efficiency"], terms["lane_efficiency"],
            terms["padded_work_ratio"], terms["memory_bound_fraction"], terms["regions"],
            math.log1p(terms["units"]), terms["roofline_fraction"]]


def _target_family(target) -> str:
    return "gpu" if target.kind.name == "cuda" else "cpu"


@tvm.ir.utils.derived_object
class HybridCostModel(ms.cost_model.PyCostModel):
    """Analytical latency x exp(XGBoost residual), for MetaSchedule.

    Parameters
    ----------
    target : Target, optional
        Only used to pick the hardware before the first call; otherwise the
        tuning context's target is used.
    hardware : HardwareSpec or str, optional
        A spec or a spec JSON path (``tvm-latmodel calibrate``); default
        ``HardwareSpec.from_target`` of the context's target.
    pretrained : str, optional
        A model file from ``tvm-latmodel train`` or :meth:`save`.
    residual : bool
        ``False`` gives the pure analytical model.
    objective : {"reg:squarederror", "rank:pairwise"}
        The residual's objective (see :mod:`tvm_latmodel.residual`).
    min_samples : int
        Valid measurements of a task before its residual switches on.
    refit_growth : float
        Refit when the data grew by this fraction since the last fit.
    evidence_half : float
        Measurements at which the residual's weight reaches one half.
    pretrained_weight : float
        Damping of a pretrained residual on a task it was not trained on.
    seed : int
        Seed of the fallback random scores and of XGBoost.
    """

    def __init__(self, *, target=None, hardware=None, pretrained: str | None = None, residual: bool = True,
                 objective: str = "reg:squarederror", min_samples: int = 8, refit_growth: float = 0.25,
                 evidence_half: float = 16.0, pretrained_weight: float = 0.5, seed: int = 0):
        super().__init__()
        self.target = target
        self.hardware = hardware
        self.pretrained = pretrained
        self.residual = residual
        self.objective = objective
        self.min_samples = min_samples
        self.refit_growth = refit_growth
        self.evidence_half = evidence_half
        self.pretrained_weight = pretrained_weight
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._hw: HardwareSpec | None = None
        self._extractor = None
        self._warned: set[str] = set()
        # learned state
        self.X_: list[list[float]] = []
        self.log_analytical_: list[float] = []
        self.log_measured_: list[float] = []
        self.groups_: list[str] = []
        self.failed_count_ = 0
        self.fitted_on_ = 0
        self.model_: ResidualModel | None = None
        self.pretrained_model_: ResidualModel | None = None
        if pretrained is not None:
            self._load_pretrained(pretrained)

    # ------------------------------------------------------------ hardware
    def _hardware(self, target) -> HardwareSpec:
        if self._hw is None:
            if isinstance(self.hardware, HardwareSpec):
                self._hw = self.hardware
            elif isinstance(self.hardware, str):
                self._hw = HardwareSpec.load(self.hardware)
            else:
                self._hw = HardwareSpec.from_target(target if target is not None else self.target)
            fam = getattr(self, "pretrained_family_", None)
            if self.pretrained_model_ is not None and fam not in (None, self._hw.kind):
                # Only known now that the task's target is: never apply it.
                self._warn_once("pretrained", f"{self.pretrained}: pretrained for {fam} targets, this task "
                                f"targets {self._hw.kind}; ignoring the pretrained residual")
                self.pretrained_model_ = None
        return self._hw

    # ------------------------------------------------------------ features
    def _analytical(self, context, candidates):
        hw = self._hardware(context.target)
        kind = hw.kind
        ests = [estimate(summarize(c.sch.mod, kind), hw) for c in candidates]
        return ests

    def _features(self, context, candidates, ests) -> np.ndarray:
        if self._extractor is None:
            self._extractor = ms.feature_extractor.PerStoreFeature()
        feats = self._extractor.extract_from(context, candidates)
        rows = []
        for f, e in zip(feats, ests):
            arr = f.numpy()
            agg = arr.sum(axis=0) if arr.size else np.zeros(arr.shape[1] if arr.ndim == 2 else 164)
            rows.append(np.concatenate([agg, analytical_features(e.terms())]))
        return np.asarray(rows, dtype=np.float32)

    def _residual_active(self) -> bool:
        return self.residual and (self.model_ is not None or self.pretrained_model_ is not None)

    def _correction(self, X: np.ndarray, log_analytical: np.ndarray) -> np.ndarray:
        corr = np.zeros(len(X))
        if self.pretrained_model_ is not None:
            corr += self.pretrained_weight * self.pretrained_model_.predict(X)
        if self.model_ is not None:
            n = self.fitted_on_
            corr += (n / (n + self.evidence_half)) * self.model_.predict(X)
        return corr

    # ---------------------------------------------------------- predictions
    def predict_latency_s(self, context, candidates) -> np.ndarray:
        """Predicted latency in seconds of each candidate (no fallback)."""
        ests = self._analytical(context, candidates)
        log_a = np.log(np.array([max(e.latency_s, 1e-12) for e in ests]))
        if self._residual_active() and len(candidates):
            X = self._features(context, candidates, ests)
            log_a = log_a + self._correction(X, log_a)
        return np.exp(log_a)

    def predict(self, context, candidates) -> np.ndarray:
        """Scores, higher = faster: ``roofline_bound / predicted_latency``."""
        n = len(candidates)
        if n == 0:
            return np.zeros(0)
        try:
            ests = self._analytical(context, candidates)
        except Exception as err:  # noqa: BLE001 - tuning must go on
            self._warn_once("analytical", f"analytical model failed ({type(err).__name__}: {err}); "
                            "scoring candidates at random")
            return self._rng.uniform(0.0, 1.0, size=n)
        bound = ests[0].roofline_bound_s
        log_lat = np.log(np.array([max(e.latency_s, 1e-12) for e in ests]))
        if self._residual_active():
            try:
                X = self._features(context, candidates, ests)
                log_lat = log_lat + self._correction(X, log_lat)
            except Exception as err:  # noqa: BLE001
                self._warn_once("residual", f"residual model failed ({type(err).__name__}: {err}); "
                                "using the analytical score")
        scores = bound / np.exp(log_lat)
        scores[~np.isfinite(scores)] = 0.0
        return scores.astype("float64")

    # --------------------------------------------------------------- update
    def update(self, context, candidates, results) -> None:
        """Learn from measured candidates; failed results are only counted."""
        try:
            self._update(context, candidates, results)
        except Exception as err:  # noqa: BLE001
            self._warn_once("update", f"update failed ({type(err).__name__}: {err}); the model keeps its state")

    def _update(self, context, candidates, results) -> None:
        if len(candidates) != len(results):
            raise ValueError(f"{len(candidates)} candidates but {len(results)} results")
        good = []
        for c, r in zip(candidates, results):
            lat = valid_latency(r)
            if lat is None:
                self.failed_count_ += 1
            else:
                good.append((c, lat))
        if not good or not self.residual:
            return
        cands = [c for c, _ in good]
        ests = self._analytical(context, cands)
        X = self._features(context, cands, ests)
        group = ms.utils.shash2hex(context.mod)
        for row, e, (_, lat) in zip(X, ests, good):
            self.X_.append(row.tolist())
            self.log_analytical_.append(math.log(max(e.latency_s, 1e-12)))
            self.log_measured_.append(math.log(lat))
            self.groups_.append(group)
        n = len(self.X_)
        if n >= self.min_samples and n >= self.fitted_on_ * (1 + self.refit_growth):
            self.refit()

    def refit(self) -> None:
        """Fit the residual on all data now (normally done adaptively by update)."""
        X = np.asarray(self.X_, dtype=np.float32)
        la = np.asarray(self.log_analytical_)
        lm = np.asarray(self.log_measured_)
        if self.pretrained_model_ is not None:
            # learn what the (damped) pretrained correction still gets wrong
            la = la + self.pretrained_weight * self.pretrained_model_.predict(X)
        codes = {g: i for i, g in enumerate(dict.fromkeys(self.groups_))}
        groups = np.array([codes[g] for g in self.groups_])
        self.model_ = ResidualModel(objective=self.objective, seed=self.seed).fit(X, la, lm, groups)
        self.fitted_on_ = len(X)

    # ---------------------------------------------------------- persistence
    def save(self, path: str) -> None:
        """Write ``path`` (JSON) and, when fitted, ``path + '.residual.json'``
        with XGBoost's own JSON booster beside it. No pickle."""
        residual_file = None
        if self.model_ is not None:
            residual_file = os.path.basename(path) + ".residual.json"
            self.model_.save(os.path.join(os.path.dirname(os.path.abspath(path)), residual_file))
        hw = self._hw or (self.hardware if isinstance(self.hardware, HardwareSpec) else None)
        meta = {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, "package_version": __version__,
                "target_family": hw.kind if hw is not None else None,
                "hardware": hw.to_dict() if hw is not None else None,
                "params": {"residual": self.residual, "objective": self.objective, "min_samples": self.min_samples,
                           "refit_growth": self.refit_growth, "evidence_half": self.evidence_half,
                           "pretrained_weight": self.pretrained_weight, "seed": self.seed},
                "residual_file": residual_file, "fitted_on": self.fitted_on_, "failed_count": self.failed_count_,
                "n_samples": len(self.X_)}
        with open(path, "w") as f:
            json.dump(meta, f, indent=1)

    def load(self, path: str) -> None:
        """Read a file written by :meth:`save` (or ``tvm-latmodel train``).

        Raises
        ------
        ValueError
            Not a hybrid model file, another format version, or a model of a
            different target family than this model's hardware.
        """
        meta, residual = _read_model_file(path)
        want = self._hw.kind if self._hw is not None else (
            self.hardware.kind if isinstance(self.hardware, HardwareSpec) else
            (_target_family(self.target) if self.target is not None else None))
        if want is not None and meta.get("target_family") not in (None, want):
            raise ValueError(f"{path}: model was trained for a {meta['target_family']} target, "
                             f"this model tunes a {want} target")
        if meta.get("hardware") and self._hw is None and self.hardware is None:
            self._hw = HardwareSpec.from_dict(meta["hardware"], origin=path)
        p = meta.get("params", {})
        self.residual = bool(p.get("residual", self.residual))
        self.objective = p.get("objective", self.objective)
        self.model_ = residual
        self.fitted_on_ = int(meta.get("fitted_on", 0))
        self.failed_count_ = int(meta.get("failed_count", 0))

    def _load_pretrained(self, path: str) -> None:
        meta, residual = _read_model_file(path)
        if residual is None:
            raise ValueError(f"{path}: the model has no fitted residual to start from")
        want = self._hardware_kind_hint()
        if want is not None and meta.get("target_family") not in (None, want):
            raise ValueError(f"{path}: pretrained for a {meta['target_family']} target, "
                             f"cannot start a {want} model")
        self.pretrained_model_ = residual
        self.pretrained_family_ = meta.get("target_family")

    def _hardware_kind_hint(self):
        if isinstance(self.hardware, HardwareSpec):
            return self.hardware.kind
        if self.target is not None:
            return _target_family(self.target)
        return None

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(f"HybridCostModel: {message}", RuntimeWarning, stacklevel=3)


def _read_model_file(path: str):
    meta = read_versioned_json(path, MODEL_FORMAT, MODEL_FORMAT_VERSION, "hybrid model")
    residual = None
    if meta.get("residual_file"):
        rpath = os.path.join(os.path.dirname(os.path.abspath(path)), meta["residual_file"])
        if not os.path.isfile(rpath):
            raise ValueError(f"{path}: its residual file {rpath} is missing")
        residual, _ = ResidualModel.load(rpath)
    return meta, residual
