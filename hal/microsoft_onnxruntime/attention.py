"""Self-attention written out op by op, as onnxruntime's fused `com.microsoft.Attention` (CPU kernel): the
microsoft_onnxruntime driver's transformer fusion. Entry points: `find_attention_chains`, `emit_attention`.
Imports hal.common and the standard only (the graph builder comes in as an argument); never operations.py.

Paddle's transformer encoders (ERNIE, BERT, UIE: `paddle.nn.TransformerEncoderLayer` and paddlenlp's) reach a driver
as about twenty NNAdapter operations per layer: three projections (MAT_MUL, ADD of the bias, RESHAPE to heads,
TRANSPOSE), the scaled scores (MUL, MAT_MUL with transpose_y), the additive mask (ADD), a clamp at float32's lowest
value (MAX: the softmax converter's, where Paddle's kernel turns a row of -inf into 1 / n; a model's own), SOFTMAX,
a dropout left as MUL by 1, the weighted sum (MAT_MUL) and the heads merged back (TRANSPOSE, RESHAPE). onnxruntime's
own optimizer does not recognise this graph (its attention fusions live in the offline transformer optimizer and
expect PyTorch exports), so it runs ~20 kernels per layer. Its Attention kernel computes the same thing with one
packed Q/K/V GEMM and no head transposes. Measured on the zoo's ERNIE-3.0 and UIE (1 thread, bare sessions,
interleaved): 12-17% faster than the op-by-op program and than paddle2onnx's.

What is computed is unchanged: the same products (each output element's dot product runs over the same values in
the same order: the packed GEMM is the three GEMMs side by side), the same softmax. The scale moves from the
queries onto the scores ((q * s) . k becomes s * (q . k)), a rounding-level difference. A row of scores that is
all -inf (a mask of -inf hiding every key) comes out NaN from the kernel, as from Softmax and from Paddle's own
softmax where it does not clamp. The one semantic step is the clamp, which the kernel has no room for: a chain is
taken with it only when the mask is bounded well inside float32 (`_Matcher.mask_bound`: made of constants and casts
of integers or booleans), so that no score it would clamp can be -inf; a score past float32 (an overflow of q . k)
is the only case left.

A chain is taken only when every value inside it is read by the chain alone (nothing else sees the intermediate
heads), the three projections read one input with constant weights of one width, and every dim is known (the
program's concrete shapes): anything else converts op by op.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from hal.common import Unsupported, fuse_code_of, unpack
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import Operand, Operation

_F32 = np.dtype(np.float32)
_LOWEST = float(np.finfo(np.float32).min)
# A mask whose magnitude stays under this keeps every finite score finite after the addition with room to spare;
# paddlenlp's masks are 1e4 (or 1e9) times 0/1.
_MASK_BOUND_LIMIT = 1e30
_HEADS_PERM = (0, 2, 1, 3)  # (B, S, H, d) <-> (B, H, S, d)
_KEYS_T_PERM = (0, 2, 3, 1)  # (B, S, H, d) -> (B, H, d, S): keys already transposed for the scores


@dataclasses.dataclass
class Projection:
    """x @ weight (+ bias), reshaped to heads: weight (D_in, D) constant, bias (D,) or None."""

    weight: np.ndarray
    bias: np.ndarray | None
    operations: list


@dataclasses.dataclass
class AttentionChain:
    x: Operand  # (B, S, D_in), read by the three projections
    query: Projection
    key: Projection
    value: Projection
    heads: int
    scale: float
    mask: Operand | None  # added to the scores, broadcastable to (B, H, S, S)
    output: Operand  # (B, S, D): the merged heads
    operations: list  # every operation of the chain, in the model's topological order
    last: Operation  # the one writing `output`: the chain is emitted there


class _NotAttention(Exception):
    pass


def _scalar(operand: Operand | None) -> float | None:
    if operand is None or not operand.is_constant:
        return None
    value = np.asarray(operand.value)
    return float(value.reshape(-1)[0]) if value.size == 1 else None


def _ints(op: Operation, slot: str) -> tuple:
    return tuple(unpack(op).ints(slot))  # a computed one raises Unsupported: not this pattern (find_attention_chains)


class _Matcher:
    def __init__(self, model: Model):
        self.producers = model.producers()
        self.consumers = model.consumers()
        self.outputs = {o.index for o in model.output_operands}

    def only_reader(self, operand: Operand, op_type) -> Operation:
        """The operation of `op_type` that alone reads `operand`, an intermediate of the chain."""
        readers = self.consumers.get(operand.index, [])
        if operand.index in self.outputs or len(readers) != 1 or readers[0].type != op_type:
            raise _NotAttention
        return readers[0]

    def producer(self, operand: Operand | None, *types) -> Operation:
        """The operation of one of `types` writing `operand`, which nothing but the chain reads."""
        if operand is None or operand.is_constant:
            raise _NotAttention
        op = self.producers.get(operand.index)
        if op is None or op.type not in types or operand.index in self.outputs \
                or len(self.consumers.get(operand.index, [])) != 1:
            raise _NotAttention
        return op

    @staticmethod
    def plain(op: Operation) -> None:
        if fuse_code_of(op) != 0:
            raise _NotAttention

    def scaled(self, operand: Operand, chain: list) -> tuple[Operand, float]:
        """`operand` through an optional MUL by a scalar constant: (what it multiplies, the factor)."""
        op = self.producers.get(operand.index)
        if op is None or op.type != T.MUL:
            return operand, 1.0
        for i in (0, 1):
            factor = _scalar(op.inputs[1 - i])
            if factor is not None and not op.inputs[i].is_constant:
                self.producer(operand, T.MUL)
                self.plain(op)
                chain.append(op)
                return op.inputs[i], factor
        return operand, 1.0

    def projection(self, heads: Operand, perm: tuple, chain: list) -> tuple[Operand, Projection, int]:
        """heads = TRANSPOSE(perm) of RESHAPE(x @ W + b) to (B, S, H, d): (x, the projection, H)."""
        transpose = self.producer(heads, T.TRANSPOSE)
        if _ints(transpose, "perm") != perm:
            raise _NotAttention
        reshape = self.producer(transpose.inputs[0], T.RESHAPE)
        split = tuple(reshape.outputs[0].type.dims)
        if len(split) != 4:
            raise _NotAttention
        ops = [transpose, reshape]
        projected = reshape.inputs[0]
        bias = None
        producer = self.producer(projected, T.ADD, T.MAT_MUL)
        if producer.type == T.ADD:
            self.plain(producer)
            operands = [o for o in producer.inputs[:2]]
            constant = [o for o in operands if o.is_constant]
            if len(constant) != 1:
                raise _NotAttention
            bias = np.asarray(constant[0].value)
            ops.append(producer)
            producer = self.producer(next(o for o in operands if not o.is_constant), T.MAT_MUL)
        matmul = producer
        args = unpack(matmul)
        if args.bool("transpose_x", False) or args.bool("transpose_y", False):
            raise _NotAttention
        x, w = matmul.inputs[0], matmul.inputs[1]
        if not w.is_constant or x.is_constant or w.type.rank != 2 or w.type.dtype != _F32:
            raise _NotAttention
        weight = np.asarray(w.value)
        width = weight.shape[1]
        if bias is not None:
            if bias.size != width or bias.dtype != _F32 or any(d != 1 for d in bias.shape[:-1]):
                raise _NotAttention
            bias = bias.reshape(width)
        if split[2] * split[3] != width or tuple(x.type.dims[:2]) != split[:2]:
            raise _NotAttention
        ops.append(matmul)
        chain.extend(ops)
        return x, Projection(weight, bias, list(reversed(ops))), split[2]

    def mask_bound(self, operand: Operand, depth: int = 0) -> float:
        """An upper bound of |mask| over every run, or inf when none follows from how it is made."""
        if operand.is_constant:
            value = np.asarray(operand.value, dtype=np.float64)
            return float(np.abs(value).max()) if value.size and np.isfinite(value).all() else float("inf")
        op = self.producers.get(operand.index)
        if op is None or depth > 16:
            return float("inf")
        if op.type == T.CAST:
            source = op.inputs[0].type.dtype
            if source == np.bool_:
                return 1.0
            if np.issubdtype(source, np.integer):
                return float(np.iinfo(source).max) + 1.0
            return float("inf")
        if op.type in (T.RESHAPE, T.UNSQUEEZE, T.SQUEEZE, T.EXPAND, T.TRANSPOSE, T.FLATTEN):
            return self.mask_bound(op.inputs[0], depth + 1)
        if op.type in (T.MUL, T.ADD, T.SUB) and fuse_code_of(op) == 0:
            a, b = (self.mask_bound(o, depth + 1) for o in op.inputs[:2])
            return a * b if op.type == T.MUL else a + b
        return float("inf")

    def match(self, softmax: Operation) -> AttentionChain:
        scores_out = softmax.inputs[0]
        dims = tuple(scores_out.type.dims)
        if len(dims) != 4 or any(d <= 0 for d in dims) or scores_out.type.dtype != _F32 \
                or unpack(softmax).int("axis", -1) not in (-1, 3):
            raise _NotAttention
        chain: list = [softmax]
        clamped = False
        scores = scores_out
        op = self.producer(scores, T.MAX, T.ADD, T.MUL, T.MAT_MUL)
        while op.type == T.MAX:  # the softmax converter's clamp, and the model's own maybe
            self.plain(op)
            lowest = [o for o in op.inputs[:2] if _scalar(o) is not None]
            if len(lowest) != 1 or np.float32(_scalar(lowest[0])) != np.float32(_LOWEST):
                raise _NotAttention
            clamped = True
            chain.append(op)
            scores = next(o for o in op.inputs[:2] if o is not lowest[0])
            op = self.producer(scores, T.MAX, T.ADD, T.MUL, T.MAT_MUL)
        mask = None
        if op.type == T.ADD:
            self.plain(op)
            a, b = op.inputs[:2]
            # the scores are the operand of the scores' own shape that a MAT_MUL or MUL makes
            first = self.producers.get(a.index)
            if first is not None and first.type in (T.MAT_MUL, T.MUL) and tuple(a.type.dims) == dims:
                scores, mask = a, b
            else:
                scores, mask = b, a
            if mask.type.dtype != _F32 or mask.type.rank > 4 or any(d <= 0 for d in mask.type.dims):
                raise _NotAttention
            padded = (1,) * (4 - mask.type.rank) + tuple(mask.type.dims)
            if any(m not in (1, d) for m, d in zip(padded, dims)):
                raise _NotAttention
            chain.append(op)
        if clamped and (mask is not None and self.mask_bound(mask) > _MASK_BOUND_LIMIT):
            raise _NotAttention
        scores, score_scale = self.scaled(scores, chain)
        qk = self.producer(scores, T.MAT_MUL)
        args = unpack(qk)
        if args.bool("transpose_x", False):
            raise _NotAttention
        keys_transposed = args.bool("transpose_y", False)
        chain.append(qk)
        queries, query_scale = self.scaled(qk.inputs[0], chain)
        keys, key_scale = self.scaled(qk.inputs[1], chain)
        x, query, heads = self.projection(queries, _HEADS_PERM, chain)
        x_k, key, heads_k = self.projection(keys, _HEADS_PERM if keys_transposed else _KEYS_T_PERM, chain)
        # the weighted sum: SOFTMAX -> (MUL by 1, a dropout) -> MAT_MUL with the values -> heads merged
        probabilities = softmax.outputs[0]
        reader = self.consumers.get(probabilities.index, [])
        if len(reader) == 1 and reader[0].type == T.MUL:
            dropout = reader[0]
            self.plain(dropout)
            if {_scalar(o) for o in dropout.inputs[:2]} - {None} != {1.0}:
                raise _NotAttention
            if probabilities.index in self.outputs:
                raise _NotAttention
            chain.append(dropout)
            probabilities = dropout.outputs[0]
        pv = self.only_reader(probabilities, T.MAT_MUL)
        if softmax.outputs[0].index in self.outputs or pv.inputs[0] is not probabilities:
            raise _NotAttention
        args = unpack(pv)
        if args.bool("transpose_x", False) or args.bool("transpose_y", False):
            raise _NotAttention
        chain.append(pv)
        x_v, value, heads_v = self.projection(pv.inputs[1], _HEADS_PERM, chain)
        merge = self.only_reader(pv.outputs[0], T.TRANSPOSE)
        if _ints(merge, "perm") != _HEADS_PERM:
            raise _NotAttention
        reshape = self.only_reader(merge.outputs[0], T.RESHAPE)
        output = reshape.outputs[0]
        batch, length, width = (tuple(output.type.dims) + (0, 0, 0))[:3]
        if not (x is x_k is x_v) or heads != heads_k or heads != heads_v or output.type.rank != 3 \
                or output.type.dtype != _F32 or x.type.dtype != _F32 or x.type.rank != 3 \
                or any(d <= 0 for d in x.type.dims) or not query.weight.shape == key.weight.shape \
                == value.weight.shape or value.weight.shape[1] != width or (batch, length) != tuple(x.type.dims[:2]) \
                or dims != (batch, heads, length, length):
            raise _NotAttention
        chain.extend([merge, reshape])
        return AttentionChain(x, query, key, value, heads, score_scale * query_scale * key_scale, mask, output,
                              chain, reshape)


def find_attention_chains(model: Model) -> list[AttentionChain]:
    """Every self-attention of `model` that `emit_attention` can write as one Attention node (module docstring)."""
    matcher = _Matcher(model)
    order = {id(op): k for k, op in enumerate(model.topological_operations())}
    chains = []
    taken: set = set()
    for op in model.operations:
        if op.type != T.SOFTMAX:
            continue
        try:
            chain = matcher.match(op)
        except (_NotAttention, Unsupported):  # Unsupported: a parameter computed at run time (unpack's constants)
            continue
        ids = {id(o) for o in chain.operations}
        if len(ids) != len(chain.operations) or ids & taken:
            continue
        taken |= ids
        chain.operations.sort(key=lambda o: order[id(o)])
        if chain.operations[-1] is not chain.last:
            continue
        chains.append(chain)
    return chains


def emit_attention(g, chain: AttentionChain) -> bool:
    """Append the Attention node of `chain`, writing its output operand."""
    projections = (chain.query, chain.key, chain.value)
    weights = np.concatenate([p.weight for p in projections], axis=1)
    bias = np.concatenate([p.bias if p.bias is not None else np.zeros(p.weight.shape[1], np.float32)
                           for p in projections])
    inputs = [g.operand_name(chain.x), g.const(weights.astype(np.float32), hint="qkv_w"),
              g.const(bias.astype(np.float32), hint="qkv_b"), None, None]
    if chain.mask is not None:
        batch, length = chain.x.type.dims[:2]
        padded = (1,) * (4 - chain.mask.type.rank) + tuple(chain.mask.type.dims)
        # the kernel broadcasts the bias over batch and heads only: the query axis is spelled out, once per mask
        full = g.attention_biases.get(chain.mask.index)
        if full is None:
            name = g.operand_name(chain.mask) if not chain.mask.is_constant else g.const(chain.mask.value)
            target = (padded[0], padded[1], length, length)
            full = name if padded == target else g.one("Expand", [name, g.i64(target)])
            g.attention_biases[chain.mask.index] = full
        inputs.append(full)
    g.node("Attention", inputs, [g.operand_name(chain.output)], domain="com.microsoft", num_heads=chain.heads,
           scale=float(chain.scale))
    return True
