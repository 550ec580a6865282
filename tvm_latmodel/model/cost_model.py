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
* A pretrained residual (``tvm-latmodel train``, or the shipped one)
  starts the model; its correction is weighted by ``pretrained_weight`` and
  the task's own residual learns what it gets wrong.
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
from ..fileformat import ListOf, MapOf, read_versioned_json
from ..hardware import HardwareSpec
from ..latency import valid_latency
from .features import (PER_STORE_FEATURE_COLUMNS, CachedPerStoreFeature, LRUCache, candidate_keys, per_store_sums,
                       shared_extractor)
from .modes import estimate, task_bound_s
from .program import summarize
from .residual import DEFAULT_OBJECTIVE, ResidualModel


#: Analytical estimates by (hardware, target, scheduled module): a pure function
#: of its key, shared by every model of the process.
_ESTIMATES = LRUCache(50_000)

MODEL_FORMAT = "tvm-latmodel-hybrid"
# 2: analytical features relative to the roofline bound, training data saved.
MODEL_FORMAT_VERSION = 2
#: ``pretrained=SHIPPED`` starts from the residual shipped for the target family.
SHIPPED = "shipped"

ANALYTICAL_FEATURES = ("log_latency_over_bound", "log_compute_share", "log_memory_share", "log_overhead_share",
                       "log_waves", "wave_efficiency", "lane_efficiency", "padded_work_ratio",
                       "memory_bound_fraction", "regions", "log_units", "roofline_fraction")


def analytical_features(terms: dict, roofline_bound_s: float) -> list[float]:
    """The analytical terms as residual features.

    Times enter relative to the task's roofline bound on this hardware (and
    the parts of the latency relative to the latency), never in seconds, so
    a residual learnt on one CPU means the same on another.
    """
    lg = lambda x: math.log(max(float(x), 1e-12))  # noqa: E731
    lat = max(float(terms["latency_s"]), 1e-12)
    return [lg(lat / max(roofline_bound_s, 1e-12)), lg(terms["compute_s"] / lat), lg(terms["memory_s"] / lat),
            lg(terms["overhead_s"] / lat), math.log1p(terms["waves"]), terms["wave_efficiency"],
            terms["lane_efficiency"], terms["padded_work_ratio"], terms["memory_bound_fraction"], terms["regions"],
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
    pretrained : str or None
        ``"shipped"`` (default): the residual that ships in the package for
        the target's family (x86 CPUs: trained on the logs of ``tuning_logs/cpu``
        and ``tuning_logs/cpu-znver4`` with their times re-measured), when
        there is one. A path: a model file from ``tvm-latmodel train`` or
        :meth:`save`. ``None``: no pretrained residual.
    residual : bool
        ``False`` gives the pure analytical model.
    objective : str
        The residual's objective, one of
        :data:`tvm_latmodel.model.residual.OBJECTIVES`.
    min_samples : int
        Valid measurements of a task before its residual switches on.
    refit_growth : float
        Refit when the data grew by this fraction since the last fit.
    evidence_half : float
        Measurements at which the residual's weight reaches one half.
    pretrained_weight : float
        Weight of a residual fitted on other tasks (the shipped one, or other
        tasks' measurements) on a task it was not trained on. Leave-one-family-out
        on the 54 CPU logs preferred 1.0 by trials, but live tuning with 1.0
        found slower schedules on XFM:2 and DEP:1 than with 0.5
        (``benchmarks/modes/PROTOCOL_stop19.md`` part 4), so it stays 0.5.
    seed : int
        Seed of the fallback random scores and of XGBoost.
    """

    def __init__(self, *, target=None, hardware=None, pretrained: str | None = SHIPPED, residual: bool = True,
                 objective: str = DEFAULT_OBJECTIVE, min_samples: int = 8, refit_growth: float = 0.25,
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
        self.fitted_counts_: dict[str, int] = {}
        self.bounds_: dict[str, float] = {}
        self._hw_key: str | None = None
        self._shipped_checked = False
        self._feature_context = None
        self.model_: ResidualModel | None = None
        self.pretrained_model_: ResidualModel | None = None
        self.pretrained_workloads_: frozenset[str] = frozenset()
        if pretrained is not None and pretrained != SHIPPED:
            self._load_pretrained(pretrained)
        elif pretrained == SHIPPED and residual and self._hardware_kind_hint() is not None:
            self._load_shipped(self._hardware_kind_hint())

    # ------------------------------------------------------------ hardware
    def _hardware(self, target) -> HardwareSpec:
        if self._hw is None:
            if isinstance(self.hardware, HardwareSpec):
                self._hw = self.hardware
            elif isinstance(self.hardware, str):
                self._hw = HardwareSpec.load(self.hardware)
            else:
                self._hw = HardwareSpec.from_target(target if target is not None else self.target)
            if (self.pretrained == SHIPPED and self.residual and self.pretrained_model_ is None
                    and not self._shipped_checked):
                self._load_shipped(self._hw.kind)
            fam = getattr(self, "pretrained_family_", None)
            if self.pretrained_model_ is not None and fam not in (None, self._hw.kind):
                # Only known now that the task's target is: never apply it.
                self._warn_once("pretrained", f"{self.pretrained}: pretrained for {fam} targets, this task "
                                f"targets {self._hw.kind}; ignoring the pretrained residual")
                self.pretrained_model_ = None
        return self._hw

    # ------------------------------------------------------------ features
    def _target(self, context):
        """The context's target; a bare ``TuneContext()`` (TVM's own cost-model
        tests) has none, and then this model's target or the host is used."""
        target = getattr(context, "target", None) if context is not None else None
        if target is None:
            target = self.target
        if target is None:
            from ..targets import host_target

            target = self.target = host_target()
        return target

    def _task_key(self, context) -> str:
        mod = getattr(context, "mod", None) if context is not None else None
        return ms.utils.shash2hex(mod) if mod is not None else "(no module)"

    def _analytical(self, context, candidates, keys=None):
        """Analytical estimate of each candidate (``keys``: their
        :func:`~.features.candidate_keys` for the context's target, if known)."""
        target = self._target(context)
        hw = self._hardware(target)
        if self._hw_key is None:
            self._hw_key = json.dumps(hw.to_dict(), sort_keys=True, default=str)
        if keys is None:
            keys = candidate_keys(target, candidates)
        out = []
        for c, k in zip(candidates, keys):
            key = (self._hw_key, k)
            est = _ESTIMATES.get(key)
            if est is None:
                est = _ESTIMATES.put(key, estimate(summarize(c.sch.mod, hw.kind), hw))
            out.append(est)
        return out

    def _bound(self, context, candidates) -> float:
        """The task's roofline bound (:func:`~.modes.task_bound_s`), from
        the context's module, or the first candidate's when the context has
        none (a bare ``TuneContext()``): the same for every schedule, so
        scores keep their meaning across calls and runs."""
        key = self._task_key(context)
        if key not in self.bounds_ and len(candidates):
            mod = getattr(context, "mod", None) if context is not None else None
            hw = self._hardware(self._target(context))
            self.bounds_[key] = float(task_bound_s(mod if mod is not None else candidates[0].sch.mod, hw))
        return self.bounds_.get(key, 1.0)

    def _extractor_for(self) -> CachedPerStoreFeature:
        if self._extractor is None:
            self._extractor = shared_extractor()
        return self._extractor

    def _feature_context_for(self, context):
        if getattr(context, "target", None) is None:
            # TVM's feature extractor needs a target: give it the one we use.
            if self._feature_context is None:
                self._feature_context = ms.TuneContext(target=self._target(context))
            return self._feature_context
        return context

    def _start_features(self, context, candidates, keys=None):
        """Start extracting the per-store features of ``candidates`` in a
        background thread (:meth:`~.features.CachedPerStoreFeature.features_async`);
        pass the result to :meth:`_features` as ``pending``."""
        return self._extractor_for().features_async(self._feature_context_for(context), candidates, keys)

    def _features(self, context, candidates, ests, pending=None) -> np.ndarray:
        if pending is not None:
            feats = pending.result()
        else:
            feats = self._extractor_for().features(self._feature_context_for(context), candidates)
        bound = self._bound(context, candidates)
        rows = []
        for agg, e in zip(per_store_sums(feats), ests):
            rows.append(np.concatenate([agg, analytical_features(e.terms(), bound)]))
        return np.asarray(rows, dtype=np.float32)

    def _residual_active(self) -> bool:
        return self.residual and (self.model_ is not None or self.pretrained_model_ is not None
                                  or len(self.X_) >= self.min_samples)

    def residual_weight(self, task: str) -> float:
        """Weight of the learnt residual on ``task``: ``n / (n + evidence_half)``
        for the ``n`` measurements of this task it was fitted on, and the
        rest of the way ``pretrained_weight`` when it was fitted on other
        tasks too (they count as pretraining for this one)."""
        if self.model_ is None:
            return 0.0
        n = self.fitted_counts_.get(task, 0)
        own = n / (n + self.evidence_half)
        others = self.fitted_on_ > n
        return own + (1.0 - own) * (self.pretrained_weight if others else 0.0)

    def _correction(self, X: np.ndarray, task: str) -> np.ndarray:
        """The residual's log-correction: the damped pretrained one plus the
        learnt one (:meth:`residual_weight`)."""
        self._refit_if_due(task)
        corr = np.zeros(len(X))
        if self.pretrained_model_ is not None:
            corr += self.pretrained_weight * self.pretrained_model_.predict(X)
        w = self.residual_weight(task)
        if w > 0:
            corr += w * self.model_.predict(X)
        return corr

    def _refit_if_due(self, task: str) -> None:
        """Refit, lazily before scoring, when ``task``'s own data or all data
        grew by ``refit_growth`` since the last fit (and there are at least
        ``min_samples``): many updates between two predictions cost one fit."""
        n_all = len(self.X_)
        if n_all == self.fitted_on_ or n_all < self.min_samples:
            return
        n_task = self.groups_.count(task)
        task_grew = n_task >= self.min_samples and n_task >= self.fitted_counts_.get(task, 0) * (1 + self.refit_growth)
        all_grew = n_all >= self.fitted_on_ * (1 + self.refit_growth)
        if task_grew or all_grew:
            self.refit()

    # ---------------------------------------------------------- predictions
    def predict_latency_s(self, context, candidates) -> np.ndarray:
        """Predicted latency in seconds of each candidate (no fallback)."""
        ests = self._analytical(context, candidates)
        log_a = np.log(np.array([max(e.latency_s, 1e-12) for e in ests]))
        if self._residual_active() and len(candidates):
            X = self._features(context, candidates, ests)
            log_a = log_a + self._correction(X, self._task_key(context))
        return np.exp(log_a)

    def predict(self, context, candidates) -> np.ndarray:
        """Scores, higher = faster: ``roofline_bound / predicted_latency``."""
        n = len(candidates)
        if n == 0:
            return np.zeros(0)
        pending = None
        try:
            target = self._target(context)
            self._hardware(target)  # loads the shipped residual, if any, before _residual_active
            keys = candidate_keys(target, candidates)
            if self._residual_active():
                # TVM's C++ feature extraction (GIL released) runs while the
                # analytical model summarises the candidates in Python.
                try:
                    pending = self._start_features(context, candidates, keys)
                except Exception as err:  # noqa: BLE001
                    pending = err
            ests = self._analytical(context, candidates, keys)
            bound = self._bound(context, candidates)
        except Exception as err:  # noqa: BLE001 - tuning must go on
            if pending is not None and not isinstance(pending, Exception):
                pending.wait()
            self._warn_once("analytical", f"analytical model failed ({type(err).__name__}: {err}); "
                            "scoring candidates at random")
            return self._rng.uniform(0.0, 1.0, size=n)
        log_lat = np.log(np.array([max(e.latency_s, 1e-12) for e in ests]))
        if self._residual_active():
            try:
                if isinstance(pending, Exception):
                    raise pending
                X = self._features(context, candidates, ests, pending)
                log_lat = log_lat + self._correction(X, self._task_key(context))
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
        group = self._task_key(context)
        for row, e, (_, lat) in zip(X, ests, good):
            self.X_.append(row.tolist())
            self.log_analytical_.append(math.log(max(e.latency_s, 1e-12)))
            self.log_measured_.append(math.log(lat))
            self.groups_.append(group)
        # The refit itself waits for the next prediction (_refit_if_due).

    def absorb(self, other: "HybridCostModel") -> None:
        """Add ``other``'s training records, featurised with *its* spec (e.g.
        another machine's logs), to this model's, as if :meth:`update` had
        learnt them; the residual refits as after an update. Bounds are not
        taken: this model computes the bound of a task it scores with its
        own spec."""
        self.X_ += other.X_
        self.log_analytical_ += other.log_analytical_
        self.log_measured_ += other.log_measured_
        self.groups_ += other.groups_
        self.failed_count_ += other.failed_count_

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
        self.fitted_counts_ = {g: self.groups_.count(g) for g in codes}

    # ---------------------------------------------------------- persistence
    def save(self, path: str) -> None:
        """Write ``path`` (JSON: parameters, the training data, per-task fit
        counts and bounds, the workloads trained on) and, when fitted,
        ``path + '.residual.json'`` with XGBoost's own JSON booster beside it.
        No pickle. (MetaSchedule's ``save`` takes the path only; see
        :meth:`write` to leave the training data out.)"""
        self.write(path)

    def write(self, path: str, *, training_data: bool = True) -> None:
        """:meth:`save`, optionally without the training data (``training_data=False``)."""
        residual_file = None
        if self.model_ is not None:
            residual_file = os.path.basename(path) + ".residual.json"
            self.model_.save(os.path.join(os.path.dirname(os.path.abspath(path)), residual_file))
        hw = self._hw or (self.hardware if isinstance(self.hardware, HardwareSpec) else None)
        meta = {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, "package_version": __version__,
                "target_family": hw.kind if hw is not None else self._hardware_kind_hint(),
                "hardware": hw.to_dict() if hw is not None else None,
                "params": {"residual": self.residual, "objective": self.objective, "min_samples": self.min_samples,
                           "refit_growth": self.refit_growth, "evidence_half": self.evidence_half,
                           "pretrained_weight": self.pretrained_weight, "seed": self.seed},
                "feature_names": [f"per_store_{i}" for i in range(PER_STORE_FEATURE_COLUMNS)]
                + list(ANALYTICAL_FEATURES),
                "residual_file": residual_file, "fitted_on": self.fitted_on_, "failed_count": self.failed_count_,
                "fitted_counts": self.fitted_counts_, "bounds": self.bounds_,
                "trained_on": sorted(set(self.groups_)),
                "training": {"X": self.X_, "log_analytical_s": self.log_analytical_,
                             "log_measured_s": self.log_measured_, "groups": self.groups_} if training_data else None,
                "n_samples": len(self.X_)}
        with open(path, "w") as f:
            json.dump(meta, f)

    def load(self, path: str) -> None:
        """Read a file written by :meth:`save` (or ``tvm-latmodel train``):
        the fitted residual and the data it was fitted on.

        Raises
        ------
        ValueError
            Not a hybrid model file, another format version, or a model of a
            different target family than this model's hardware.
        """
        meta, residual = _read_model_file(path)
        want = self._hw.kind if self._hw is not None else self._hardware_kind_hint()
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
        self.fitted_counts_ = {str(k): int(v) for k, v in meta.get("fitted_counts", {}).items()}
        self.bounds_ = {str(k): float(v) for k, v in meta.get("bounds", {}).items()}
        data = meta.get("training") or {}
        self.X_ = [list(map(float, row)) for row in data.get("X", [])]
        self.log_analytical_ = [float(x) for x in data.get("log_analytical_s", [])]
        self.log_measured_ = [float(x) for x in data.get("log_measured_s", [])]
        self.groups_ = [str(g) for g in data.get("groups", [])]
        if not (len(self.X_) == len(self.log_analytical_) == len(self.log_measured_) == len(self.groups_)):
            raise ValueError(f"{path}: its training data columns differ in length")

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
        self.pretrained_workloads_ = frozenset(str(w) for w in meta.get("trained_on", []))

    def _load_shipped(self, family: str) -> None:
        """Start from the residual shipped for ``family``, if the package has one."""
        self._shipped_checked = True
        path = shipped_model_path(family)
        if path is not None:
            self._load_pretrained(path)

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


def train_on_tasks(tasks, *, hardware=None, objective: str = DEFAULT_OBJECTIVE, seed: int = 0,
                   progress: bool = True):
    """A HybridCostModel whose residual is fitted once on every valid record
    of ``tasks`` (``replay.Task``; one target family), starting from no
    pretrained residual: what ``tvm-latmodel train`` saves.

    Parameters
    ----------
    hardware : HardwareSpec or str, optional
        The spec (or a spec JSON's path) of the machine that **measured**
        the logs. The analytical estimates and the per-task bounds the
        residual is fitted against are computed with it, not with the spec
        of the machine that runs the fit. Default: the spec every task
        carries from the ``hardware.json`` beside its log
        (``Task.hardware``), when they all carry the same one; else
        ``HardwareSpec.from_target`` of the first task's target, which reads
        the clock and caches of this host only when the target's ``mcpu``
        is this host's CPU and uses defaults otherwise (a warning says so;
        a 3.0 GHz default for a 2.6 GHz CPU moved zero-shot top-1 by up to
        0.08, BENCHMARKS.md stop 30). Tasks that carry different specs
        (folders of several machines, each with its ``hardware.json``) are
        split by spec and fitted as :func:`train_on_machines` does, each
        machine's records with its own spec (those without one as one more
        machine, with ``from_target``'s spec and its warning).
    """
    if hardware is None:
        machines: list[tuple[list, HardwareSpec | None]] = []
        for t in tasks:
            own = getattr(t, "hardware", None)
            for group, spec in machines:
                if spec == own:
                    group.append(t)
                    break
            else:
                machines.append(([t], own))
        if len(machines) > 1:  # tasks without a spec: one more group, fitted as from_target gives
            return train_on_machines(machines, objective=objective, seed=seed, progress=progress)
    return train_on_machines([(tasks, hardware)], objective=objective, seed=seed, progress=progress)


def train_on_machines(machines, *, objective: str = DEFAULT_OBJECTIVE, seed: int = 0, progress: bool = True):
    """:func:`train_on_tasks` for logs measured on several machines:
    ``machines`` is a list of ``(tasks, hardware)`` pairs, each machine's
    records featurised with its own spec (the residual's inputs are
    normalised by the spec, so one residual can learn from all of them).
    The saved file then names no single machine's spec (``hardware`` null).
    A workload logged on two machines is refused: its records would be
    ranked as one task."""
    import sys

    from ..sampling import make_context

    if not machines or not any(tasks for tasks, _ in machines):
        raise ValueError("no task to train on")
    all_tasks = [t for tasks, _ in machines for t in tasks]
    families = {_target_family(t.target) for t in all_tasks}
    if len(families) > 1:
        raise ValueError("the logs mix CPU and GPU targets; train one model per target family")
    family = families.pop()
    parts = []
    for tasks, hardware in machines:
        if not tasks:
            continue
        given = hardware is not None
        if isinstance(hardware, str):
            hardware = HardwareSpec.load(hardware)
        elif hardware is None:
            own = [getattr(t, "hardware", None) for t in tasks]
            if own[0] is not None and all(h == own[0] for h in own):
                hardware, given = own[0], True  # the logs' own hardware.json (replay.measuring_spec)
            else:
                hardware = HardwareSpec.from_target(tasks[0].target)
        if hardware.kind != family:
            raise ValueError(f"a {hardware.kind} spec ({hardware.name}) cannot describe the logs' "
                             f"{tasks[0].target.kind.name} target")
        _warn_training_spec(tasks, hardware, given)
        part = HybridCostModel(target=tasks[0].target, hardware=hardware, objective=objective, seed=seed,
                               pretrained=None, min_samples=10**9)  # no fit while the data comes in
        for t in tasks:
            if progress:
                print(f"[train] {t.name}: {len(t)} records ({hardware.name})", file=sys.stderr)
            part.update(make_context(t.mod, t.target), t.candidates(), t.results())
        parts.append(part)
    model = parts[0]
    if len(parts) > 1:
        model = HybridCostModel(target=all_tasks[0].target, objective=objective, seed=seed, pretrained=None,
                                min_samples=10**9)
        for part in parts:
            shared = set(part.groups_) & set(model.groups_)
            if shared:
                raise ValueError(f"workload {sorted(shared)[0]} is in the logs of two machines; "
                                 "keep one machine's log of it")
            model.absorb(part)
            model.bounds_.update(part.bounds_)
    if not model.X_:
        raise ValueError("no valid record to train on")
    model.min_samples = HybridCostModel(pretrained=None).min_samples
    model.refit()
    return model


def _warn_training_spec(tasks, spec: HardwareSpec, given: bool) -> None:
    """Warn when the spec of a fit is likely not the measuring machine's:
    none given and the logs' CPU is not this host's, logs of several CPUs
    under one spec, or a given spec of another CPU than the logs'."""
    cpus = sorted({str(t.target.attrs.get("mcpu", "") or "") for t in tasks if t.target.kind.name == "llvm"})
    if not cpus:
        return
    spec_cpu = str(spec.extra.get("mcpu", "") or "")
    if len(cpus) > 1:
        warnings.warn(f"the logs were measured for {len(cpus)} CPUs ({', '.join(cpus)}); every record is "
                      f"fitted with one spec, {spec.name} ({spec.source}). Train one model per machine",
                      stacklevel=3)
    elif given:
        if spec_cpu and spec_cpu != cpus[0]:
            warnings.warn(f"the hardware spec is of a {spec_cpu} ({spec.name}), the logs' target is {cpus[0]}",
                          stacklevel=3)
    elif spec.source == "defaults":
        warnings.warn(f"the logs' target is {cpus[0] or 'a generic CPU'}, not this host's CPU: the fit uses "
                      f"default clock and caches for it ({spec.extra.get('freq_ghz')} GHz, "
                      f"{spec.peak_gflops:.0f} GFLOP/s), not the measuring machine's. Pass that machine's spec "
                      "(--hardware; `tvm-latmodel calibrate -o spec.json` writes one there)", stacklevel=3)


def shipped_model_path(family: str) -> str | None:
    """The pretrained model file that ships for target ``family`` ("cpu" on
    x86), or None when the package has none for it."""
    import platform
    from importlib import resources

    if family != "cpu" or platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    path = resources.files("tvm_latmodel.model") / "pretrained" / "cpu-x86.json"
    return str(path) if path.is_file() else None


#: The fields of a model file and their types (checked before any is used).
MODEL_FIELDS = {
    "target_family": (str, None), "hardware": (dict, None),
    "params": {"residual": bool, "objective": str, "min_samples": int, "refit_growth": float,
               "evidence_half": float, "pretrained_weight": float, "seed": int},
    "feature_names": ListOf(str), "residual_file": (str, None), "fitted_on": int, "failed_count": int,
    "fitted_counts": MapOf(int), "bounds": MapOf(float), "trained_on": ListOf(str),
    "training": ({"X": ListOf(ListOf(float)), "log_analytical_s": ListOf(float),
                  "log_measured_s": ListOf(float), "groups": ListOf(str)}, None),
    "n_samples": int,
}


def _read_model_file(path: str):
    meta = read_versioned_json(path, MODEL_FORMAT, MODEL_FORMAT_VERSION, "hybrid model", fields=MODEL_FIELDS)
    residual = None
    if meta.get("residual_file"):
        if os.path.basename(meta["residual_file"]) != meta["residual_file"]:
            raise ValueError(f"{path}: residual_file {meta['residual_file']!r} is not a file name beside it")
        rpath = os.path.join(os.path.dirname(os.path.abspath(path)), meta["residual_file"])
        if not os.path.isfile(rpath):
            raise ValueError(f"{path}: its residual file {rpath} is missing")
        residual, _ = ResidualModel.load(rpath)
    return meta, residual
