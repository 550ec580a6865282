"""Schedules TVM 0.27 gets wrong, recognised statically, and a postprocessor that rejects them.

MetaSchedule measures a schedule without checking what it computes. One
pattern in its CPU design space computes something else on every run:
:func:`repeated_reductions`. :class:`RejectRepeatedReductions` is a
MetaSchedule postprocessor that fails such a schedule, so the search drops
it as it drops any schedule a postprocessor refuses (it is never built,
measured or recorded), and :func:`design_space` is MetaSchedule's default CPU
space with it appended. ``tune``, ``tune-network`` and every sampled
candidate (:mod:`tvm_latmodel.sampling`) use that space on CPU targets.

The run-time check stays (:func:`tvm_latmodel.networks.kernels.check_kernel`):
this is one known cause, not a proof.
"""

from __future__ import annotations

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

__all__ = ["RejectRepeatedReductions", "design_space", "repeated_reductions"]


def repeated_reductions(func: tvm.tirx.PrimFunc) -> list[tuple[str, str, int]]:
    """Reductions whose update a loop repeats while their init stays outside it.

    TVM 0.27's ``decompose_reduction`` accepts a loop above one that repeats
    the whole reduction without indexing it (a reduction ``compute_at`` under
    a consumer's loop it does not depend on) and hoists the init above both:
    the repeats then accumulate, and a sum comes out a multiple of itself.
    MetaSchedule's ``RewriteReductionBlock`` postprocessor makes that call.
    This finds the pattern statically, in a decomposed PrimFunc: an
    ``X_init`` / ``X_update`` pair with a loop of extent > 1 around the update
    but not the init whose variable the update's bindings do not use. (A max
    repeated is still right; a sum is not.)

    Returns
    -------
    list of (str, str, int)
        ``(reduction, loop variable, extent)`` per finding; empty when none.
    """
    from tvm import s_tir  # pylint: disable=import-outside-toplevel

    blocks: dict[str, tuple] = {}

    def walk(stmt, loops):
        if isinstance(stmt, tvm.tirx.For):
            walk(stmt.body, loops + [stmt])
        elif isinstance(stmt, s_tir.SBlockRealize):
            blocks[stmt.block.name_hint] = (stmt, loops)
            walk(stmt.block.body, loops)
        elif isinstance(stmt, tvm.tirx.SeqStmt):
            for child in stmt.seq:
                walk(child, loops)
        elif isinstance(stmt, (tvm.tirx.IfThenElse,)):
            walk(stmt.then_case, loops)
            if stmt.else_case is not None:
                walk(stmt.else_case, loops)
        elif hasattr(stmt, "body") and isinstance(stmt.body, tvm.tirx.Stmt):
            walk(stmt.body, loops)

    walk(func.body, [])
    found = []
    for name, (_, init_loops) in blocks.items():
        if not name.endswith("_init") or name[:-5] + "_update" not in blocks:
            continue
        update, update_loops = blocks[name[:-5] + "_update"]
        used = [v for value in update.iter_values for v in tvm.tirx.analysis.undefined_vars(value)]
        for loop in update_loops:
            if any(loop.same_as(outer) for outer in init_loops) or not isinstance(loop.extent, tvm.tirx.IntImm):
                continue
            # by identity: loops in different scopes share names (ax0, ...)
            if int(loop.extent) > 1 and not any(loop.loop_var.same_as(v) for v in used):
                found.append((name[:-5], loop.loop_var.name, int(loop.extent)))
    return found


@derived_object
class RejectRepeatedReductions(ms.postproc.PyPostproc):
    """A MetaSchedule postprocessor: fails a schedule with :func:`repeated_reductions`.

    Append it after ``RewriteReductionBlock`` (which makes the decomposition it
    looks for): :func:`design_space` does. It changes nothing in a schedule it
    accepts. A schedule it cannot inspect is accepted.
    """

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def apply(self, sch) -> bool:
        try:
            return not any(repeated_reductions(func) for func in sch.mod.functions.values()
                           if isinstance(func, tvm.tirx.PrimFunc))
        except Exception:  # noqa: BLE001 - an inspection failure must not cost a valid schedule
            return True

    def clone(self):
        return RejectRepeatedReductions()


def design_space(target: tvm.target.Target):
    """MetaSchedule's default design space for ``target``, with :class:`RejectRepeatedReductions`
    appended to an ``llvm`` target's postprocessors (other targets, or none: ``"post-order-apply"``,
    unchanged)."""
    if isinstance(target, str):
        target = tvm.target.Target(target)
    if target is None or target.kind.name != "llvm":
        return "post-order-apply"
    return ms.space_generator.PostOrderApply(
        sch_rules="from-target", mutator_probs="from-target",
        postprocs=[*ms.postproc.Postproc.create("llvm"), RejectRepeatedReductions()])
