"""Index arithmetic for :mod:`.program`: TVM expressions compiled once into
nested tuples, evaluated in pure Python (intervals over loop ranges, strides
of an access along a loop, operation counts, dtype widths).

Unknown nodes become ``("unk",)``, meaning "anywhere in the dimension".
"""

from __future__ import annotations

import tvm

# ------------------------------------------------------- expression compiling
# Expressions become nested tuples evaluated by _interval; unknown nodes
# become ("unk",), meaning "anywhere in the dimension". Environments map a
# variable's handle (``Var.__chandle__()``, identity as ``same_as``) to its
# compiled node.
#
# Sums become one flat ("aff", const, ((var, coef), ...), ((coef, node), ...))
# node: a constant, linear terms, and coefficient times any other node (a
# ``//``, ``%``, min, max or a product of two varying terms, compiled as a
# tree whose leaves may be "aff" nodes again). Interval arithmetic is exact
# on this rewriting: the interval of a sum is the sum of its terms'
# intervals, and scaling by a constant distributes over it, so the flat form
# gives the tree's interval (terms are never merged, so ``v - v`` keeps the
# tree's answer), in one loop instead of a recursion per operator: the
# footprint walk evaluates thousands per schedule. A variable stays
# "mentioned" even with coefficient 0.

_BIN = {"Add": "add", "Sub": "sub", "Mul": "mul", "FloorDiv": "div", "Div": "div",
        "FloorMod": "mod", "Mod": "mod", "Min": "min", "Max": "max"}


def _as_sum(node):
    """(const, linear terms, other terms) of a compiled node; None for an unknown."""
    tag = node[0]
    if tag == "aff":
        return node[1], node[2], node[3]
    if tag == "c":
        return node[1], (), ()
    if tag == "v":
        return 0, ((node[1], 1),), ()
    if tag == "unk":
        return None
    return 0, (), ((1, node),)


def _combine(op: str, a, b):
    """The flat "aff" node of ``a op b`` (add, sub, or a product with a
    constant), else None."""
    sa, sb = _as_sum(a), _as_sum(b)
    if sa is None or sb is None:
        return None
    (ca, la, na), (cb, lb, nb) = sa, sb
    if op == "add":
        return ("aff", ca + cb, la + lb, na + nb)
    if op == "sub":
        return ("aff", ca - cb, la + tuple((v, -k) for v, k in lb), na + tuple((-k, n) for k, n in nb))
    if op == "mul":
        if lb or nb:
            if la or na:  # both sides vary
                return None
            (ca, la, na), (cb, lb, nb) = (cb, lb, nb), (ca, la, na)
        return ("aff", ca * cb, tuple((v, k * cb) for v, k in la), tuple((k * cb, n) for k, n in na))
    return None


_UNK = ("unk",)


def _compile(expr, env: dict):
    name = type(expr).__name__
    if name == "IntImm":
        return ("c", int(expr.value))
    if name == "Var":
        return env.get(expr.__chandle__(), _UNK)
    op = _BIN.get(name)
    if op is not None:
        a, b = _compile(expr.a, env), _compile(expr.b, env)
        return _combine(op, a, b) or (op, a, b)
    if name == "Cast":
        return _compile(expr.value, env)
    return _UNK


def _interval(node, ranges):
    """(lo, hi) of a compiled expression; ``ranges[i]`` bounds loop var i."""
    tag = node[0]
    if tag == "aff":
        # Two loops with the same accumulation, not one over a list of both
        # kinds of term: building that list made summarize about 7% slower.
        lo = hi = node[1]
        for v, k in node[2]:
            a, b = ranges[v]
            x, y = k * a, k * b
            if x <= y:
                lo += x
                hi += y
            else:
                lo += y
                hi += x
        for k, n in node[3]:
            r = _interval(n, ranges)
            if r is None:
                return None
            x, y = k * r[0], k * r[1]
            if x <= y:
                lo += x
                hi += y
            else:
                lo += y
                hi += x
        return (lo, hi)
    if tag == "v":
        return ranges[node[1]]
    if tag == "c":
        return (node[1], node[1])
    if tag == "unk":
        return None
    a = _interval(node[1], ranges)
    b = node[2]
    b = (b[1], b[1]) if b[0] == "c" else _interval(b, ranges)  # mostly a constant divisor
    if a is None or b is None:
        return None
    if tag == "add":
        return (a[0] + b[0], a[1] + b[1])
    if tag == "sub":
        return (a[0] - b[1], a[1] - b[0])
    if tag == "mul":
        c = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
        return (min(c), max(c))
    if tag == "div":
        if b[0] == b[1] and b[0] > 0:
            return (a[0] // b[0], a[1] // b[0])
        return None
    if tag == "mod":
        if b[0] == b[1] and b[0] > 0:
            if a[0] // b[0] == a[1] // b[0]:
                return (a[0] % b[0], a[1] % b[0])
            return (0, b[0] - 1)
        return None
    if tag == "min":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if tag == "max":
        return (max(a[0], b[0]), max(a[1], b[1]))
    return None


def _linear(node):
    """``(const, ((var, coef), ...))`` of a compiled node that is a constant,
    a loop variable or an affine sum with no other term; else None. Its
    interval, offsets and strides are then read off the coefficients, with
    the same integers :func:`_interval` would compute."""
    tag = node[0]
    if tag == "aff":
        return (node[1], node[2]) if not node[3] else None
    if tag == "v":
        return (0, ((node[1], 1),))
    if tag == "c":
        return (node[1], ())
    return None


def _widened(iv: tuple, terms, var: int, extent: int) -> tuple:
    """Interval of an affine index (``terms`` of :func:`_linear`) once loop
    ``var`` ranges over ``[0, extent)`` instead of sitting at 0: what
    :func:`_interval` gives, without re-evaluating the other terms."""
    lo, hi = iv
    for v, k in terms:
        if v == var:
            x = k * (extent - 1)
            if x >= 0:
                hi += x
            else:
                lo += x
    return (lo, hi)


def _vars_of(node, out: set) -> set:
    """Loop-variable indices a compiled expression mentions."""
    tag = node[0]
    if tag == "v":
        out.add(node[1])
    elif tag == "aff":
        for v, _ in node[2]:
            out.add(v)
        for _, n in node[3]:
            _vars_of(n, out)
    elif tag not in ("c", "unk"):
        _vars_of(node[1], out)
        _vars_of(node[2], out)
    return out


def _strides(shape) -> list[int]:
    """Row-major element strides of a buffer shape."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    out.reverse()
    return out


def _stride_along(dims, strides, mentions, n_vars: int, var: int, extent: int):
    """Element stride of an access along loop variable ``var`` (others at 0).

    Affine indices give it from their coefficients; otherwise the offset is
    probed at 0, 1, the middle and the last iteration (:func:`_probed_stride`),
    and the stride returned when it is affine in ``var`` over the loop, else
    None (a wrap-around ``//`` or ``%`` of a fused loop, or an unknown index).
    ``mentions``: each dimension's :func:`_vars_of`.
    """
    lins = [_linear(node) for node, _ in dims]
    if None not in lins:
        # All affine (the common case): the offset is linear in ``var``.
        return sum(st * k for (_, terms), st in zip(lins, strides) for v, k in terms if v == var)
    return _probed_stride(dims, strides, mentions, n_vars, var, extent)


def _probed_stride(dims, strides, mentions, n_vars: int, var: int, extent: int):
    """:func:`_stride_along` by probing the offsets (any compiled index)."""
    ranges = [(0, 0)] * n_vars
    # Dimensions that do not mention ``var`` give the same term at every probe.
    fixed, moving = 0, []
    for (node, _), st, vs in zip(dims, strides, mentions):
        if var in vs:
            moving.append((node, st))
            continue
        iv = _interval(node, ranges)
        if iv is None or iv[0] != iv[1]:
            return None
        fixed += iv[0] * st
    offs = []
    for x in sorted({0, 1, extent // 2, extent - 1}):
        ranges[var] = (x, x)
        o = fixed
        for node, st in moving:
            iv = _interval(node, ranges)
            if iv is None or iv[0] != iv[1]:
                return None
            o += iv[0] * st
        offs.append((x, o))
    (x0, o0), (_, o1) = offs[0], offs[1]  # x = 0 and 1
    step = o1 - o0
    if any(o - o0 != step * (x - x0) for x, o in offs[2:]):
        return None
    return step


# ------------------------------------------------- guarded updates (stop 23)
_CMP = {"EQ": lambda a, b: a == b, "NE": lambda a, b: a != b, "LT": lambda a, b: a < b,
        "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b}


def _is_zero(expr) -> bool:
    return type(expr).__name__ == "FloatImm" and float(expr.value) == 0.0


def _guarded_factor(term):
    """``c`` when ``term`` is ``if_then_else(c, x, 0)`` or a product with it as a factor."""
    name = type(term).__name__
    if name == "Cast":
        return _guarded_factor(term.value)
    if name == "Call":
        op = str(term.op.name) if hasattr(term.op, "name") else ""
        if op.endswith("if_then_else") and _is_zero(term.args[2]):
            return term.args[0]
        return None
    if name == "Mul":
        g = _guarded_factor(term.a)
        return g if g is not None else _guarded_factor(term.b)
    return None


def _guard_of(value, accumulator):
    """The condition ``c`` of an accumulation ``acc + if_then_else(c, x, 0) * w``
    (the added term guarded by it, as a factor), ``acc`` a load of
    ``accumulator`` (the stored buffer); else None. Where ``c`` is false the
    statement is ``acc = acc``: no work once the compiler knows it."""
    if type(value).__name__ != "Add":
        return None
    for acc, term in ((value.a, value.b), (value.b, value.a)):
        if type(acc).__name__ == "TensorLoad" and acc.source.same_as(accumulator):  # TVM 0.27's load
            return _guarded_factor(term)
    return None


def _compile_cond(expr, env: dict):
    """A boolean expression as a nested tuple (``and``/``or``/``not``/``cmp``
    over compiled integer nodes), or None for a node of another kind."""
    name = type(expr).__name__
    if name in ("And", "Or"):
        a, b = _compile_cond(expr.a, env), _compile_cond(expr.b, env)
        return None if a is None or b is None else (name.lower(), a, b)
    if name == "Not":
        a = _compile_cond(expr.a, env)
        return None if a is None else ("not", a)
    if name in _CMP:  # an unknown operand makes it undecided where evaluated (_eval_cond)
        return ("cmp", name, _compile(expr.a, env), _compile(expr.b, env))
    if name == "IntImm":  # a constant boolean
        return ("const", bool(expr.value))
    return None


def _cond_vars(cond, out: set) -> set:
    """Loop-variable indices a compiled condition mentions."""
    tag = cond[0]
    if tag == "cmp":
        _vars_of(cond[2], out)
        _vars_of(cond[3], out)
    elif tag in ("and", "or"):
        _cond_vars(cond[1], out)
        _cond_vars(cond[2], out)
    elif tag == "not":
        _cond_vars(cond[1], out)
    return out


def _eval_cond(cond, ranges) -> bool | None:
    """The condition at one point (``ranges[v] = (x, x)``); None if undecided."""
    tag = cond[0]
    if tag == "const":
        return cond[1]
    if tag == "cmp":
        a, b = _interval(cond[2], ranges), _interval(cond[3], ranges)
        if a is None or b is None or a[0] != a[1] or b[0] != b[1]:
            return None
        return _CMP[cond[1]](a[0], b[0])
    if tag == "not":
        a = _eval_cond(cond[1], ranges)
        return None if a is None else not a
    a, b = _eval_cond(cond[1], ranges), _eval_cond(cond[2], ranges)
    if a is None or b is None:
        return None
    return (a and b) if tag == "and" else (a or b)


#: Most unrolled copies whose guards are evaluated one by one.
GUARD_MAX_COPIES = 4096


def live_copy_fraction(cond, var_ids, loops, n_vars: int) -> float:
    """Fraction of a guarded block's copies that survive unrolling.

    ``cond`` is the guard (:func:`_compile_cond`) over loop variables,
    ``var_ids[j]`` loop ``j``'s variable, ``loops`` the block's loops with
    their unroll verdicts. The guard is evaluated at every combination of
    the loops TVM unrolls; for each, at the first, second and last value of
    each other loop it mentions (one at a time, the rest at 0). If it is
    the same at all of those for every combination, it is decided at
    compile time: TVM's ``StmtSimplify`` after ``UnrollLoop`` removes the
    copies where it is false, and the fraction where it holds is returned.
    Otherwise (or when it cannot be evaluated) 1.0: it is computed at run
    time. Copies LLVM unrolls keep their work: LLVM folds the guard but not
    ``acc + 0 * w`` (not without fast-math).
    """
    mentioned = _cond_vars(cond, set())
    unrolled = [j for j, lp in enumerate(loops)
                if lp.unrolled_by == "tvm" and lp.kind != "vectorized" and lp.extent > 1 and var_ids[j] in mentioned]
    others = [j for j, lp in enumerate(loops)
              if j not in unrolled and lp.extent > 1 and var_ids[j] in mentioned]
    if not unrolled:
        return 1.0
    copies = 1
    for j in unrolled:
        copies *= loops[j].extent
    if copies > GUARD_MAX_COPIES:
        return 1.0
    probes = [(j, x) for j in others for x in sorted({1, loops[j].extent - 1})]
    ranges = [(0, 0)] * n_vars
    live = 0
    for copy in range(copies):
        for j in unrolled:
            copy, x = divmod(copy, loops[j].extent)
            ranges[var_ids[j]] = (x, x)
        base = _eval_cond(cond, ranges)
        if base is None:
            return 1.0
        for j, x in probes:
            ranges[var_ids[j]] = (x, x)
            same = _eval_cond(cond, ranges) == base
            ranges[var_ids[j]] = (0, 0)
            if not same:
                return 1.0
        live += base
    return live / copies


_OPS = {"Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "FloorDiv": 1, "Max": 1, "Min": 1, "Mod": 1, "FloorMod": 1}
# Transcendentals (exp, log, tanh ...) cost several FLOP-equivalents.
CALL_OPS = 8
# The intrinsics TVM 0.27's LLVM CPU codegen turns into a scalar libm call
# per element (``expf``, ``logf``, ``erff``, ``powf``; ``tanh`` and
# ``sigmoid`` are legalized around one ``expf``): LLVM has no vector variant
# without a vector math library, so the loop stays scalar even when TVM
# vectorizes it. Each with its cost per element relative to ``exp`` (glibc
# 2.36 on Zen 3, idle machine: exp 5.8, log 6.6, sigmoid 6.9, tanh 13.8, pow
# 13.9, erf 20.5 cycles), read off the assembly and timed by
# ``scripts/check_libm_calls.py``; ``HardwareSpec.libm_call_cycles`` is the
# cost of one ``exp``. ``sqrt`` and ``rsqrt`` are vector instructions, not here.
# Matched on the op's name after its namespace (``tirx.exp`` in 0.27, ``tir.exp`` before).
LIBM_CALLS = {"exp": 1.0, "log": 1.1, "sigmoid": 1.2, "tanh": 2.4, "pow": 2.4, "erf": 3.5}


def _count_ops(expr) -> float:
    name = type(expr).__name__
    if name in ("BufferLoad", "Var", "IntImm", "FloatImm", "StringImm"):
        return 0.0
    if name in _OPS:
        return _OPS[name] + _count_ops(expr.a) + _count_ops(expr.b)
    if name == "Cast":
        return _count_ops(expr.value)
    if name == "Select":
        return 1 + _count_ops(expr.true_value) + _count_ops(expr.false_value)
    if name == "Call":
        op = str(expr.op.name) if hasattr(expr.op, "name") else ""
        args = sum(_count_ops(a) for a in expr.args)
        if op.endswith("if_then_else"):
            return 1 + args
        return CALL_OPS + args
    return 0.0


def _count_libm(expr) -> tuple[float, float]:
    """Scalar libm calls (:data:`LIBM_CALLS`) one evaluation of ``expr`` makes,
    and their cost in ``exp`` calls."""
    name = type(expr).__name__
    if name in _OPS:
        parts = (_count_libm(expr.a), _count_libm(expr.b))
    elif name == "Cast":
        parts = (_count_libm(expr.value),)
    elif name == "Select":
        parts = (_count_libm(expr.condition), _count_libm(expr.true_value), _count_libm(expr.false_value))
    elif name == "Call":
        op = str(expr.op.name) if hasattr(expr.op, "name") else ""
        cost = LIBM_CALLS.get(op.rsplit(".", 1)[-1])
        parts = ((1.0, cost) if cost else (0.0, 0.0),) + tuple(_count_libm(a) for a in expr.args)
    else:
        return 0.0, 0.0
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def _count_fma(expr) -> float:
    """Multiplies an add or subtract consumes (each fuses with it into one
    FMA instruction): ``C + A * B`` has one, ``max(C, A)`` none."""
    name = type(expr).__name__
    if name in ("Add", "Sub"):
        fused = 0.0
        for side in (expr.a, expr.b):
            inner = side.value if type(side).__name__ == "Cast" else side
            if type(inner).__name__ == "Mul":
                fused = 1.0
        return fused + _count_fma(expr.a) + _count_fma(expr.b)
    if name in _OPS:
        return _count_fma(expr.a) + _count_fma(expr.b)
    if name == "Cast":
        return _count_fma(expr.value)
    if name == "Select":
        return _count_fma(expr.true_value) + _count_fma(expr.false_value)
    if name == "Call":
        return sum(_count_fma(a) for a in expr.args)
    return 0.0


_DTYPE_BITS: dict[str, int] = {}


def _bits(dtype) -> int:
    key = str(dtype)
    bits = _DTYPE_BITS.get(key)
    if bits is None:
        bits = tvm.runtime.DataType(key).bits
        _DTYPE_BITS[key] = bits
    return bits
