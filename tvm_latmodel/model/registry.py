"""Every cost model by short name: ours and TVM's (``make_model``)."""

from __future__ import annotations

import os

import numpy as np

#: Model names :func:`make_model` knows.
MODEL_NAMES = ("analytical", "hybrid", "xgb", "xgb-nowarmup", "random")


def _random_model_class():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.cost_model import PyCostModel

    @derived_object
    class SeededRandomModel(PyCostModel):
        """Uniform random scores from a seeded ``np.random.Generator`` (a baseline).

        Unlike ``ms.cost_model.RandomModel`` it never touches NumPy's global
        random state. ``update`` learns nothing.
        """

        def __init__(self, *, seed: int = 0):
            super().__init__()
            self.seed = seed
            self.rng_ = np.random.default_rng(seed)

        def load(self, path: str) -> None:
            raise ValueError("the random model has nothing to load")

        def save(self, path: str) -> None:
            raise ValueError("the random model has nothing to save")

        def update(self, context, candidates, results) -> None:
            return None

        def predict(self, context, candidates) -> np.ndarray:
            return self.rng_.random(len(candidates))

    return SeededRandomModel


_RANDOM_MODEL = None


def make_model(name: str, seed: int = 0, pretrained: str | os.PathLike | None = "shipped", *, target=None,
               extractor=None, hardware=None):
    """A fresh MetaSchedule cost model by short name.

    Parameters
    ----------
    name : {"analytical", "hybrid", "xgb", "xgb-nowarmup", "random"}
        ``xgb`` is TVM's own ``ms.cost_model.XGBModel`` with TVM's defaults
        (seeded through ``XGBConfig.seed``): it returns *random* scores until
        it holds ``num_warmup_samples`` = 100 samples, its real behaviour in
        a search. ``xgb-nowarmup`` is the same model with
        ``num_warmup_samples=0``, the strongest setting a TVM user can pick
        for ranking with few samples (random only while it has no data at
        all). ``random`` is a seeded random scorer. ``hybrid`` and
        ``analytical`` are :class:`tvm_latmodel.model.cost_model.HybridCostModel`
        with and without its learned residual.
    seed : int
        Seed of the model's own random state.
    pretrained : "shipped", path or None
        The hybrid model's starting residual (see ``HybridCostModel``); the
        ``analytical`` model has none, and ``xgb``/``random`` cannot load one
        (TVM's XGBModel files are pickles, which we never load from users).
    target : tvm.target.Target, optional
        The target the model predicts for (HybridCostModel).
    extractor : FeatureExtractor, optional
        The per-store feature extractor of the XGBoost models (default TVM's
        ``PerStoreFeature``; replay passes a cached one that returns the same).
    hardware : HardwareSpec, optional
        The spec the hybrid and analytical models predict with (replay
        passes the measuring machine's, ``Task.hardware``); default
        ``HardwareSpec.from_target(target)``. XGBoost and random ignore it.

    Raises
    ------
    ValueError
        Unknown name, or ``pretrained`` given for a model that cannot load one.
    """
    global _RANDOM_MODEL
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODEL_NAMES)}")
    if pretrained not in (None, "shipped") and name in ("xgb", "xgb-nowarmup", "random"):
        raise ValueError(
            f"--pretrained is for the hybrid model; the {name} model cannot load "
            "one (TVM's XGBModel files are pickles, which are never loaded from user input)"
        )
    if name in ("xgb", "xgb-nowarmup"):
        from tvm.s_tir.meta_schedule.cost_model.xgb_model import XGBConfig, XGBModel

        kwargs = {"num_warmup_samples": 0} if name == "xgb-nowarmup" else {}
        if extractor is not None:
            kwargs["extractor"] = extractor
        return XGBModel(config=XGBConfig(seed=int(seed)), **kwargs)
    if name == "random":
        if _RANDOM_MODEL is None:
            _RANDOM_MODEL = _random_model_class()
        return _RANDOM_MODEL(seed=int(seed))
    from .cost_model import HybridCostModel  # lazily: optional for xgb/random users

    return HybridCostModel(
        target=target,
        pretrained=None if (pretrained is None or name == "analytical") else str(pretrained),
        residual=(name == "hybrid"),
        seed=int(seed),
        hardware=hardware,
    )
