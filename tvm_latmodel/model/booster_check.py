"""Check an XGBoost JSON booster before XGBoost reads it.

XGBoost trusts a model file: some damaged trees (a split, child or parent
index out of range, a tree_info entry past the trees) crash the process
instead of raising. :func:`check_xgboost_json` reads the file with the strict
reader of :mod:`tvm_latmodel.fileformat` and checks every tree first, so a
damaged residual file gives a ``ValueError`` that names it.
"""

from __future__ import annotations

import os
from typing import Any

from ..fileformat import _shown, load_json

# XGBoost writes a root's parent as 2^31 - 1 (its invalid node id with the
# "left child" bit cleared).
_XGB_ROOT_PARENT = 2**31 - 1
# XGBoost stores leaf values as float32 and sums one per tree: bounded this
# way, a sum over any number of trees a file can hold stays finite.
_XGB_MAX_ABS_LEAF = 1e30


def _xgb_int(value: Any, low: int, high: int) -> int | None:
    """An int XGBoost writes as a number or a decimal string, in [low, high]; else None."""
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            return None
    if not (isinstance(value, int) and not isinstance(value, bool)) or not low <= value <= high:
        return None
    return value


def check_xgboost_json(path: str | os.PathLike, *, num_features: int | None = None) -> dict:
    """Check that ``path`` is an XGBoost tree model (``Booster.save_model`` JSON)
    that XGBoost can load and predict with, before handing it to XGBoost.

    XGBoost trusts the structure of the file it loads: a child or parent
    index out of range, a split on a feature past ``num_feature``, a tree
    id or ``tree_info`` group out of range make it read out of bounds and
    crash the whole process (a segmentation fault, not an exception). This
    check refuses such a file with a ValueError instead. It reads the file
    as strict JSON (no NaN or infinite thresholds and leaf values) and
    accepts what ``xgb.train`` writes with the ``gbtree`` booster:
    numerical splits, one value per leaf, leaf values within 1e30 in
    magnitude (XGBoost sums them in float32).

    Parameters
    ----------
    path : path
        The ``.json`` file.
    num_features : int, optional
        The number of features the caller will predict with; the model must
        have been trained on as many.

    Returns
    -------
    dict
        The parsed model.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        Starting with the file's path, naming the first problem found.
    """
    origin = str(path)
    doc = load_json(origin, "XGBoost model")

    def need(cond: bool, message: str) -> None:
        if not cond:
            raise ValueError(f"{origin}: not an XGBoost tree model this package can load: {message}")

    learner = doc.get("learner") if isinstance(doc, dict) else None
    need(isinstance(learner, dict), "no 'learner' object")
    params = learner.get("learner_model_param")
    need(isinstance(params, dict), "no learner_model_param")
    n_feat = _xgb_int(params.get("num_feature"), 1, 2**31 - 1)
    need(n_feat is not None, f"num_feature {_shown(params.get('num_feature'))} is not a positive integer")
    if num_features is not None:
        need(n_feat == num_features, f"trained on {n_feat} features, {num_features} expected")
    n_class = _xgb_int(params.get("num_class", 0), 0, 2**20)
    n_target = _xgb_int(params.get("num_target", 1), 0, 2**20)
    need(n_class is not None and n_target is not None, "num_class / num_target are not small integers")
    n_groups = max(1, n_class, n_target)
    for key in ("feature_names", "feature_types"):
        names = learner.get(key, [])
        need(isinstance(names, list) and all(isinstance(x, str) for x in names) and len(names) in (0, n_feat),
             f"{key} is not a list of {n_feat} strings")
    booster = learner.get("gradient_booster")
    need(isinstance(booster, dict) and booster.get("name") == "gbtree",
         f"booster {_shown(booster.get('name') if isinstance(booster, dict) else booster)} is not 'gbtree'")
    model = booster.get("model")
    need(isinstance(model, dict), "gradient_booster has no model")
    trees = model.get("trees")
    need(isinstance(trees, list), "model.trees is not a list")
    gparam = model.get("gbtree_model_param")
    need(isinstance(gparam, dict) and _xgb_int(gparam.get("num_trees"), 0, 2**31 - 1) == len(trees),
         f"gbtree_model_param.num_trees does not say {len(trees)}")
    need(_xgb_int(gparam.get("num_parallel_tree", 1), 1, 2**20) is not None,
         "num_parallel_tree is not a positive integer")
    info = model.get("tree_info")
    need(isinstance(info, list) and len(info) == len(trees)
         and all(_xgb_int(g, 0, n_groups - 1) is not None and not isinstance(g, str) for g in info),
         f"tree_info is not one output group in [0, {n_groups}) per tree")
    indptr = model.get("iteration_indptr")
    need(isinstance(indptr, list) and indptr and indptr[0] == 0 and indptr[-1] == len(trees)
         and all(_xgb_int(x, 0, len(trees)) is not None and not isinstance(x, str) for x in indptr)
         and all(a <= b for a, b in zip(indptr, indptr[1:])),
         f"iteration_indptr is not a non-decreasing list from 0 to {len(trees)}")
    for ti, tree in enumerate(trees):
        _check_xgb_tree(need, tree, ti, n_feat)
    return doc


def _check_xgb_tree(need, tree: Any, ti: int, n_feat: int) -> None:
    where = f"trees[{ti}]"
    need(isinstance(tree, dict), f"{where} is not an object")
    need(tree.get("id") == ti and not isinstance(tree.get("id"), bool), f"{where} has id {_shown(tree.get('id'))}")
    tparam = tree.get("tree_param")
    need(isinstance(tparam, dict), f"{where} has no tree_param")
    n = _xgb_int(tparam.get("num_nodes"), 1, 2**31 - 2)
    need(n is not None, f"{where}.tree_param.num_nodes is not a positive integer")
    need(_xgb_int(tparam.get("num_feature"), 0, 2**31 - 1) == n_feat, f"{where}.tree_param.num_feature is not {n_feat}")
    need(_xgb_int(tparam.get("size_leaf_vector", 1), 0, 1) is not None, f"{where} has vector leaves")
    need(_xgb_int(tparam.get("num_deleted", 0), 0, n - 1) is not None,
         f"{where}.tree_param.num_deleted is out of range")
    arrays = {}
    for key in ("left_children", "right_children", "parents", "split_indices", "split_conditions",
                "default_left", "split_type", "base_weights", "loss_changes", "sum_hessian"):
        values = tree.get(key)
        need(isinstance(values, list) and len(values) == n, f"{where}.{key} is not a list of {n} values")
        arrays[key] = values
    for key in ("left_children", "right_children", "parents", "split_indices", "default_left", "split_type"):
        need(all(isinstance(x, int) and not isinstance(x, bool) for x in arrays[key]),
             f"{where}.{key} holds a value that is not an integer")
    for key in ("split_conditions", "base_weights", "loss_changes", "sum_hessian"):
        need(all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in arrays[key]),
             f"{where}.{key} holds a value that is not a number")
    need(all(t == 0 for t in arrays["split_type"]), f"{where} has categorical splits")
    for key in ("categories", "categories_nodes", "categories_segments", "categories_sizes"):
        need(tree.get(key, []) == [], f"{where} has categorical splits ({key})")
    need(all(d in (0, 1) for d in arrays["default_left"]), f"{where}.default_left is not 0/1")
    need(all(0 <= f < n_feat for f in arrays["split_indices"]), f"{where} splits on a feature outside [0, {n_feat})")
    left, right, parents = arrays["left_children"], arrays["right_children"], arrays["parents"]
    need(parents[0] == _XGB_ROOT_PARENT, f"{where}: node 0 is not a root (parent {parents[0]})")
    need(all(0 <= p < n for p in parents[1:]), f"{where}.parents holds an index outside [0, {n})")
    # Walk from the root: every child index in range, its parent recorded, no node twice.
    seen, todo = {0}, [0]
    while todo:
        node = todo.pop()
        lc, rc = left[node], right[node]
        if lc == -1 and rc == -1:
            continue
        need(0 < lc < n and 0 < rc < n and lc != rc, f"{where}: node {node} has children {lc}, {rc}")
        for child in (lc, rc):
            need(child not in seen, f"{where}: node {child} is reached twice")
            need(parents[child] == node, f"{where}: node {child}'s parent is {parents[child]}, not {node}")
            seen.add(child)
            todo.append(child)
    for node in seen:
        if left[node] == -1:
            value = arrays["split_conditions"][node]
            need(abs(value) <= _XGB_MAX_ABS_LEAF, f"{where}: leaf {node} has value {value!r}, beyond "
                 f"{_XGB_MAX_ABS_LEAF:g} (XGBoost sums leaves in float32)")
    for node in set(range(n)) - seen:  # deleted nodes: never walked, but kept in range
        need(all(c == -1 or 0 < c < n for c in (left[node], right[node])),
             f"{where}: node {node} has children {left[node]}, {right[node]}")
