"""Control flow of sub-blocks and the tensor-array ops: conditional_block, select_input/select_output,
while, write_to_array, read_from_array, tensor_array_to_tensor, lod_array_length, reverse, slice (of a tensor array:
to_static's `array[i]`; of a tensor too), plus the small ops that
drive loops (increment, comparisons, logical ops, assign) so a loop body runs even where a value is a
tensor array or the converter refuses it.

A tensor array lives in the scope as a Python list of ndarrays. The scope is one flat dict: sub-block ops
write their outputs straight into it, which is what Paddle's child scopes amount to for inference
programs (sub-blocks write back their parent's loop vars by name).

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy and the loader's program model; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel
from nnadapter_bridge.loader.program import BlockRef


def _sub_block(io: OpScope) -> int:
    ref = io.attr("sub_block")
    if not isinstance(ref, BlockRef):
        raise io.error("attribute 'sub_block' is missing or not a block")
    return ref.idx


def _scalar_bool(io: OpScope, value, what: str) -> bool:
    array = np.asarray(value)
    if array.size != 1:
        raise io.error(f"{what} must hold exactly one element, got shape {array.shape}")
    return bool(array.reshape(-1)[0])


def _index(io: OpScope, slot: str = "I") -> int:
    return int(np.asarray(io.input(slot)).reshape(-1)[0])


@host_kernel("conditional_block")
def conditional_block(io: OpScope) -> None:
    conds = io.inputs("Cond")
    if io.attr("is_scalar_condition", False):
        if not conds:
            raise io.error("is_scalar_condition needs a Cond input")
        run = _scalar_bool(io, conds[0], "Cond")
    else:
        # Paddle's rule without a scalar condition: run when every Cond tensor is non-empty.
        run = all(np.asarray(c).size > 0 for c in conds)
    if run:
        io.executor.run_block(_sub_block(io), io.scope)


@host_kernel("while")
def while_loop(io: OpScope) -> None:
    names = io.input_names("Condition")
    if len(names) != 1:
        raise io.error(f"expects one Condition var, got {names}")
    block = _sub_block(io)
    while _scalar_bool(io, io.value(names[0]), "Condition"):
        io.executor.run_block(block, io.scope)


@host_kernel("select_input")
def select_input(io: OpScope) -> None:
    names = io.input_names("X")
    mask = _index(io, "Mask")
    if not 0 <= mask < len(names):
        raise io.error(f"Mask {mask} out of range for {len(names)} inputs")
    io.set_output("Out", io.value(names[mask]))


@host_kernel("select_output")
def select_output(io: OpScope) -> None:
    names = io.output_names("Out")
    mask = _index(io, "Mask")
    if not 0 <= mask < len(names):
        raise io.error(f"Mask {mask} out of range for {len(names)} outputs")
    io.scope[names[mask]] = io.value(io.input_names("X")[0])


@host_kernel("write_to_array")
def write_to_array(io: OpScope) -> None:
    out = io.output_names("Out")[0]
    current = io.scope.get(out)
    # A fresh list: the old one may also be bound to another var name (assign of an array).
    array = list(current) if isinstance(current, list) else []
    i = _index(io)
    if i < 0:
        raise io.error(f"negative array index {i}")
    x = np.array(io.input("X"), copy=True)
    if i >= len(array):
        array.extend([None] * (i + 1 - len(array)))
    array[i] = x
    io.scope[out] = array


@host_kernel("read_from_array")
def read_from_array(io: OpScope) -> None:
    array = io.input("X")
    if not isinstance(array, list):
        raise io.error("X is not a tensor array")
    i = _index(io)
    if not 0 <= i < len(array) or array[i] is None:
        raise io.error(f"index {i} out of range for an array of {len(array)} elements")
    io.set_output("Out", array[i])


@host_kernel("lod_array_length")
def lod_array_length(io: OpScope) -> None:
    array = io.input("X")
    if not isinstance(array, list):
        raise io.error("X is not a tensor array")
    io.set_output("Out", np.array([len(array)], dtype=np.int64))


@host_kernel("reverse")
def reverse(io: OpScope) -> None:
    """The legacy `reverse`: a tensor is flipped along `axis` (the converter's case too); a tensor array has its
    elements in reverse order (Paddle's kernel takes axis [0] for an array, and reverses the list)."""
    x = io.input("X")
    axes = [int(a) for a in io.attr("axis", [])]
    if not axes:
        raise io.error("'axis' can not be empty (Paddle's check)")
    if isinstance(x, list):
        if axes != [0]:
            raise io.error(f"a tensor array is reversed along axis 0 only, got axis {axes}")
        io.set_output("Out", list(reversed(x)))
        return
    io.set_output("Out", np.flip(x, axis=tuple(axes)).copy())


def _slice_bounds(io: OpScope, attr: str, tensor: str, tensor_list: str) -> list[int]:
    """An int-list bound of `slice`: its tensor first, then its tensor list, then the attribute (Paddle's order)."""
    if io.has_input(tensor):
        return [int(v) for v in np.asarray(io.input(tensor)).reshape(-1)]
    if io.has_input(tensor_list):
        return [int(np.asarray(v).reshape(-1)[0]) for v in io.inputs(tensor_list)]
    return [int(v) for v in io.attr(attr, [])]


@host_kernel("slice")
def slice_op(io: OpScope) -> None:
    """The legacy `slice`. Of a tensor array (PIR's slice_array_dense, to_static's `array[i]`): with axis 0
    decreased, the element at `starts[0]`, a negative index counting from the end, as Paddle's kernel reads it
    (`ends` unread). Of a tensor (its converter's case; here when the host runs every op through its kernel):
    input[starts:ends] along `axes` with Python's rule for negative and out-of-range bounds (Paddle's for step 1),
    then the `decrease_axis` dims squeezed."""
    x = io.input("Input")
    axes = [int(a) for a in io.attr("axes", [])]
    decrease = [int(a) for a in io.attr("decrease_axis", [])]
    starts = _slice_bounds(io, "starts", "StartsTensor", "StartsTensorList")
    if isinstance(x, list):
        if axes != [0] or decrease != [0] or not starts:
            raise io.error("a tensor array is sliced to one element (axes [0], decrease_axis [0]) only")
        start = starts[0] + len(x) if starts[0] < 0 else starts[0]
        start = max(start, 0)
        if start >= len(x) or x[start] is None:
            raise io.error(f"index {start} out of range for an array of {len(x)} elements")
        io.set_output("Out", np.array(x[start], copy=True))
        return
    ends = _slice_bounds(io, "ends", "EndsTensor", "EndsTensorList")
    if not len(axes) == len(starts) == len(ends):
        raise io.error(f"axes {axes}, starts {starts} and ends {ends} differ in length")
    index = [slice(None)] * x.ndim
    for axis, start, end in zip(axes, starts, ends):
        index[axis % x.ndim] = slice(start, end)
    out = x[tuple(index)]
    if decrease:
        out = out.reshape([d for k, d in enumerate(out.shape) if k not in {a % x.ndim for a in decrease}])
    io.set_output("Out", np.array(out, copy=True))


@host_kernel("tensor_array_to_tensor")
def tensor_array_to_tensor(io: OpScope) -> None:
    array = io.input("X")
    if not isinstance(array, list) or not array:
        raise io.error("X must be a non-empty tensor array")
    axis = int(io.attr("axis", 0))
    if io.attr("use_stack", False):
        out = np.stack(array, axis=axis)
        sizes = [1] * len(array)
    else:
        out = np.concatenate(array, axis=axis)
        sizes = [a.shape[axis] for a in array]
    io.set_output("Out", out)
    io.set_output("OutIndex", np.asarray(sizes, dtype=np.int32))


@host_kernel("increment")
def increment(io: OpScope) -> None:
    x = io.input("X")
    io.set_output("Out", (x + np.asarray(io.attr("step", 1.0))).astype(x.dtype))


_COMPARISONS = {
    "less_than": np.less, "less_equal": np.less_equal, "greater_than": np.greater,
    "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal,
}


@host_kernel(*_COMPARISONS)
def compare(io: OpScope) -> None:
    io.set_output("Out", _COMPARISONS[io.op.type](io.input("X"), io.input("Y")))


_LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor}


@host_kernel(*_LOGICAL)
def logical_binary(io: OpScope) -> None:
    io.set_output("Out", _LOGICAL[io.op.type](io.input("X"), io.input("Y")))


@host_kernel("logical_not")
def logical_not(io: OpScope) -> None:
    io.set_output("Out", np.logical_not(io.input("X")))


@host_kernel("assign")
def assign(io: OpScope) -> None:
    x = io.input("X")
    io.set_output("Out", list(x) if isinstance(x, list) else np.array(x, copy=True))
