"""Lower a scheduled workload for CUDA and describe its kernel launches (grid,
block, dynamic shared memory, argument buffers) so that a machine without TVM
can run the generated source: the ``launches`` of a bundle entry."""

from __future__ import annotations

import tvm

# Launch tags that consume one launch value each, besides the thread tags.
DYN_SHARED_MEMORY_TAG = "tirx.use_dyn_shared_memory"
_THREAD_TAGS = {
    "blockIdx.x": ("grid", 0),
    "blockIdx.y": ("grid", 1),
    "blockIdx.z": ("grid", 2),
    "threadIdx.x": ("block", 0),
    "threadIdx.y": ("block", 1),
    "threadIdx.z": ("block", 2),
}

def _buffer_info(buf) -> dict:
    return {
        "name": str(buf.name),
        "shape": [int(x) for x in buf.shape],
        "dtype": str(buf.dtype),
    }

# --------------------------------------------------------------------------
# lowering and launch extraction
# --------------------------------------------------------------------------

def _lower(mod: tvm.IRModule, target: tvm.target.Target):
    """Run ``tirx.build``'s passes; return (host IRModule, device IRModule)."""
    from tvm.tirx.build import split_host_device_mods

    target_host = tvm.target.Target("llvm" if tvm.runtime.enabled("llvm") else "c")
    mod = tvm.tirx.transform.BindTarget(target.with_host(target_host))(mod)
    pipeline, finalize_host, finalize_device = tvm.tirx.get_default_tir_pipeline(target)
    mod = pipeline(mod)
    host_mod, device_mods = split_host_device_mods(mod)
    if len(device_mods) != 1:
        raise ValueError(f"expected one device module, got {len(device_mods)}")
    (device_mod,) = device_mods.values()
    device_mod = finalize_device()(device_mod)
    return host_mod, device_mod

def _walk_stmts(stmt, visit) -> None:
    """Call ``visit`` on ``stmt`` and every statement nested in it, in order."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        visit(node)
        children = []
        if isinstance(node, tvm.tirx.SeqStmt):
            children = list(node.seq)
        else:
            for attr in ("body", "then_case", "else_case"):
                child = getattr(node, attr, None)
                if isinstance(child, tvm.tirx.Stmt):
                    children.append(child)
        stack.extend(reversed(children))

def _expr_children(expr) -> list:
    if isinstance(expr, tvm.ir.Call):
        return list(expr.args)
    out = []
    for attr in ("a", "b", "value", "condition", "true_value", "false_value"):
        child = getattr(expr, attr, None)
        if isinstance(child, tvm.ir.Expr):
            out.append(child)
    return out

def _buffer_source(expr, env: dict, workspace_of: dict, args_var, depth: int = 0):
    """Where a kernel operand (a data pointer) comes from.

    Returns ``("param", i)`` for the ``i``-th packed-API argument (the
    PrimFunc's ``i``-th parameter), ``("workspace", j)`` for the ``j``-th
    buffer the host allocates, or None. Buffers are Vars in TVM 0.27; their
    data is ``tirx.buffer_data(buf)``; ``DeclBuffer`` aliases (views) and
    ``Bind`` statements are followed through ``env``.
    """
    if depth > 64:
        return None
    if isinstance(expr, tvm.ir.Var):
        if expr in workspace_of:
            return ("workspace", workspace_of[expr])
        bound = env.get(expr)
        if bound is None:
            return None
        return _buffer_source(bound, env, workspace_of, args_var, depth + 1)
    if isinstance(expr, tvm.ir.Call) and isinstance(expr.op, tvm.ir.Op):
        if expr.op.name == "tirx.tvm_struct_get" and expr.args[0].same_as(args_var):
            return ("param", int(expr.args[1]))
    for child in _expr_children(expr):
        found = _buffer_source(child, env, workspace_of, args_var, depth + 1)
        if found is not None:
            return found
    return None

def _const(expr, env: dict, what: str) -> int:
    seen = 0
    while isinstance(expr, tvm.tirx.Var) and expr in env and seen < 20:
        expr, seen = env[expr], seen + 1
    if isinstance(expr, tvm.tirx.IntImm):
        return int(expr.value)
    raise ValueError(f"{what} is not a constant ({expr}); dynamic shapes are not supported")

def _kernel_params(func: tvm.tirx.PrimFunc) -> list[dict]:
    out = []
    for var in func.params:
        ty = var.ty
        if isinstance(ty, tvm.ir.PointerType):
            elem = ty.element_type
            out.append({"name": str(var.name), "kind": "pointer", "dtype": str(elem.dtype)})
        elif isinstance(ty, tvm.ir.PrimType):
            out.append({"name": str(var.name), "kind": "scalar", "dtype": str(ty.dtype)})
        else:
            raise ValueError(f"kernel {func.attrs['global_symbol']}: parameter {var} has type {ty}")
    return out

def launch_plan(mod: tvm.IRModule, target: tvm.target.Target) -> dict:
    """Lower a scheduled workload and describe how to run it without TVM.

    Parameters
    ----------
    mod : IRModule
        A scheduled workload with one PrimFunc ``main`` whose parameters are
        all buffers of static shape.
    target : Target
        A CUDA target.

    Returns
    -------
    dict
        ``source`` (CUDA C), ``kernels`` (name -> parameter list),
        ``workspace`` (temporary global buffers the host allocates) and
        ``launches`` (in call order: ``kernel``, ``grid``, ``block``,
        ``dynamic_shared_memory_bytes``, ``flags``, ``args``).
    """
    from tvm.tirx.build import codegen_build

    func = mod["main"]
    param_names = [str(v.name) for v in func.params]
    host_mod, device_mod = _lower(mod, target)
    with tvm.transform.PassContext.current():
        source = codegen_build(device_mod, target).inspect_source()
    kernels = {
        str(gv.name_hint): _kernel_params(f) for gv, f in device_mod.functions.items()
    }
    host = None
    for gv, f in host_mod.functions.items():
        if f.attrs is not None and f.attrs.get("tirx.is_entry_func", False):
            host = f
    if host is None:
        raise ValueError("no entry function in the lowered host module")
    args_var = host.params[1]

    env: dict = {}
    workspace: list[dict] = []
    workspace_of: dict = {}
    launches: list[dict] = []

    def visit(node) -> None:
        if isinstance(node, tvm.tirx.Bind):
            env[node.var] = node.value
        elif isinstance(node, tvm.tirx.DeclBuffer):
            if getattr(node, "data", None) is not None:
                env[node.buffer] = node.data
        elif isinstance(node, tvm.tirx.AllocBuffer):
            buf = node.buffer
            workspace_of[buf] = len(workspace)
            info = _buffer_info(buf)
            info["scope"] = str(buf.scope())
            workspace.append(info)
        elif isinstance(node, tvm.tirx.Evaluate):
            call = node.value
            if (
                isinstance(call, tvm.ir.Call)
                and isinstance(call.op, tvm.ir.Op)
                and call.op.name == "tirx.call_ffi_kernel"
            ):
                launches.append(_launch_of(call))

    def resolve_arg(expr, kernel: str, pos: int) -> dict:
        if isinstance(expr, tvm.tirx.IntImm | tvm.tirx.FloatImm):
            return {"kind": "scalar", "dtype": str(expr.dtype), "value": expr.value}
        found = _buffer_source(expr, env, workspace_of, args_var)
        if found is not None and found[0] == "workspace":
            return {"kind": "workspace", "index": found[1]}
        if found is None or not 0 <= found[1] < len(param_names):
            raise ValueError(f"cannot tell which buffer argument {pos} of {kernel} ({expr}) is")
        return {"kind": "param", "index": found[1], "name": param_names[found[1]]}

    def _launch_of(call) -> dict:
        kernel = str(call.args[0].value)
        tags = [str(t) for t in call.attrs.launch_params]
        n_values = sum(1 for t in tags if t in _THREAD_TAGS or t == DYN_SHARED_MEMORY_TAG)
        operands = list(call.args[1 : len(call.args) - n_values])
        values = list(call.args[len(call.args) - n_values :])
        grid, block, dyn, flags = [1, 1, 1], [1, 1, 1], 0, []
        vi = 0
        for tag in tags:
            if tag in _THREAD_TAGS:
                which, axis = _THREAD_TAGS[tag]
                (grid if which == "grid" else block)[axis] = _const(values[vi], env, f"{kernel} {tag}")
                vi += 1
            elif tag == DYN_SHARED_MEMORY_TAG:
                dyn = _const(values[vi], env, f"{kernel} dynamic shared memory")
                vi += 1
            else:
                flags.append(tag)
        if kernel not in kernels:
            raise ValueError(f"host calls kernel {kernel!r}, which the device module lacks")
        if len(operands) != len(kernels[kernel]):
            raise ValueError(
                f"host passes {len(operands)} operands to {kernel}, "
                f"which takes {len(kernels[kernel])}"
            )
        return {
            "kernel": kernel,
            "grid": grid,
            "block": block,
            "dynamic_shared_memory_bytes": dyn,
            "flags": flags,
            "args": [resolve_arg(a, kernel, i) for i, a in enumerate(operands)],
        }

    _walk_stmts(host.body, visit)
    if not launches:
        raise ValueError("the lowered host function launches no kernel")
    for name in kernels:
        if f" {name}(" not in source:
            raise ValueError(f"kernel {name!r} not found in the generated CUDA source")
    return {"source": source, "kernels": kernels, "workspace": workspace, "launches": launches}
