"""The NNAdapter standard in Python, the ground every floor above stands on: codes (`codes`), OperandType/Operand/
Operation (`types`), Model (`model`), the per-operation signatures and shape inference (`operations/`), the numpy
references (`reference`), model serialization, the runtime and the .nnc cache. Import each from its module; the
package itself loads nothing. It imports nothing of nnadapter_bridge but `errors` (the layers contract's ground).
"""
