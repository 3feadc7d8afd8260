from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AttrType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INT: _ClassVar[AttrType]
    FLOAT: _ClassVar[AttrType]
    STRING: _ClassVar[AttrType]
    INTS: _ClassVar[AttrType]
    FLOATS: _ClassVar[AttrType]
    STRINGS: _ClassVar[AttrType]
    BOOLEAN: _ClassVar[AttrType]
    BOOLEANS: _ClassVar[AttrType]
    BLOCK: _ClassVar[AttrType]
    LONG: _ClassVar[AttrType]
    BLOCKS: _ClassVar[AttrType]
    LONGS: _ClassVar[AttrType]
    FLOAT64S: _ClassVar[AttrType]
    VAR: _ClassVar[AttrType]
    VARS: _ClassVar[AttrType]
    FLOAT64: _ClassVar[AttrType]
    SCALAR: _ClassVar[AttrType]
    SCALARS: _ClassVar[AttrType]
INT: AttrType
FLOAT: AttrType
STRING: AttrType
INTS: AttrType
FLOATS: AttrType
STRINGS: AttrType
BOOLEAN: AttrType
BOOLEANS: AttrType
BLOCK: AttrType
LONG: AttrType
BLOCKS: AttrType
LONGS: AttrType
FLOAT64S: AttrType
VAR: AttrType
VARS: AttrType
FLOAT64: AttrType
SCALAR: AttrType
SCALARS: AttrType

class Version(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class Complex(_message.Message):
    __slots__ = ("r", "i")
    R_FIELD_NUMBER: _ClassVar[int]
    I_FIELD_NUMBER: _ClassVar[int]
    r: float
    i: float
    def __init__(self, r: _Optional[float] = ..., i: _Optional[float] = ...) -> None: ...

class Scalar(_message.Message):
    __slots__ = ("type", "b", "i", "r", "c")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        BOOLEAN: _ClassVar[Scalar.Type]
        LONG: _ClassVar[Scalar.Type]
        FLOAT64: _ClassVar[Scalar.Type]
        COMPLEX128: _ClassVar[Scalar.Type]
    BOOLEAN: Scalar.Type
    LONG: Scalar.Type
    FLOAT64: Scalar.Type
    COMPLEX128: Scalar.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    I_FIELD_NUMBER: _ClassVar[int]
    R_FIELD_NUMBER: _ClassVar[int]
    C_FIELD_NUMBER: _ClassVar[int]
    type: Scalar.Type
    b: bool
    i: int
    r: float
    c: Complex
    def __init__(self, type: _Optional[_Union[Scalar.Type, str]] = ..., b: _Optional[bool] = ..., i: _Optional[int] = ..., r: _Optional[float] = ..., c: _Optional[_Union[Complex, _Mapping]] = ...) -> None: ...

class OpDesc(_message.Message):
    __slots__ = ("type", "inputs", "outputs", "attrs", "is_target")
    class Attr(_message.Message):
        __slots__ = ("name", "type", "i", "f", "s", "ints", "floats", "strings", "b", "bools", "block_idx", "l", "blocks_idx", "longs", "float64s", "var_name", "vars_name", "float64", "scalar", "scalars")
        NAME_FIELD_NUMBER: _ClassVar[int]
        TYPE_FIELD_NUMBER: _ClassVar[int]
        I_FIELD_NUMBER: _ClassVar[int]
        F_FIELD_NUMBER: _ClassVar[int]
        S_FIELD_NUMBER: _ClassVar[int]
        INTS_FIELD_NUMBER: _ClassVar[int]
        FLOATS_FIELD_NUMBER: _ClassVar[int]
        STRINGS_FIELD_NUMBER: _ClassVar[int]
        B_FIELD_NUMBER: _ClassVar[int]
        BOOLS_FIELD_NUMBER: _ClassVar[int]
        BLOCK_IDX_FIELD_NUMBER: _ClassVar[int]
        L_FIELD_NUMBER: _ClassVar[int]
        BLOCKS_IDX_FIELD_NUMBER: _ClassVar[int]
        LONGS_FIELD_NUMBER: _ClassVar[int]
        FLOAT64S_FIELD_NUMBER: _ClassVar[int]
        VAR_NAME_FIELD_NUMBER: _ClassVar[int]
        VARS_NAME_FIELD_NUMBER: _ClassVar[int]
        FLOAT64_FIELD_NUMBER: _ClassVar[int]
        SCALAR_FIELD_NUMBER: _ClassVar[int]
        SCALARS_FIELD_NUMBER: _ClassVar[int]
        name: str
        type: AttrType
        i: int
        f: float
        s: str
        ints: _containers.RepeatedScalarFieldContainer[int]
        floats: _containers.RepeatedScalarFieldContainer[float]
        strings: _containers.RepeatedScalarFieldContainer[str]
        b: bool
        bools: _containers.RepeatedScalarFieldContainer[bool]
        block_idx: int
        l: int
        blocks_idx: _containers.RepeatedScalarFieldContainer[int]
        longs: _containers.RepeatedScalarFieldContainer[int]
        float64s: _containers.RepeatedScalarFieldContainer[float]
        var_name: str
        vars_name: _containers.RepeatedScalarFieldContainer[str]
        float64: float
        scalar: Scalar
        scalars: _containers.RepeatedCompositeFieldContainer[Scalar]
        def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[AttrType, str]] = ..., i: _Optional[int] = ..., f: _Optional[float] = ..., s: _Optional[str] = ..., ints: _Optional[_Iterable[int]] = ..., floats: _Optional[_Iterable[float]] = ..., strings: _Optional[_Iterable[str]] = ..., b: _Optional[bool] = ..., bools: _Optional[_Iterable[bool]] = ..., block_idx: _Optional[int] = ..., l: _Optional[int] = ..., blocks_idx: _Optional[_Iterable[int]] = ..., longs: _Optional[_Iterable[int]] = ..., float64s: _Optional[_Iterable[float]] = ..., var_name: _Optional[str] = ..., vars_name: _Optional[_Iterable[str]] = ..., float64: _Optional[float] = ..., scalar: _Optional[_Union[Scalar, _Mapping]] = ..., scalars: _Optional[_Iterable[_Union[Scalar, _Mapping]]] = ...) -> None: ...
    class Var(_message.Message):
        __slots__ = ("parameter", "arguments")
        PARAMETER_FIELD_NUMBER: _ClassVar[int]
        ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
        parameter: str
        arguments: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, parameter: _Optional[str] = ..., arguments: _Optional[_Iterable[str]] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    IS_TARGET_FIELD_NUMBER: _ClassVar[int]
    type: str
    inputs: _containers.RepeatedCompositeFieldContainer[OpDesc.Var]
    outputs: _containers.RepeatedCompositeFieldContainer[OpDesc.Var]
    attrs: _containers.RepeatedCompositeFieldContainer[OpDesc.Attr]
    is_target: bool
    def __init__(self, type: _Optional[str] = ..., inputs: _Optional[_Iterable[_Union[OpDesc.Var, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[OpDesc.Var, _Mapping]]] = ..., attrs: _Optional[_Iterable[_Union[OpDesc.Attr, _Mapping]]] = ..., is_target: _Optional[bool] = ...) -> None: ...

class OpProto(_message.Message):
    __slots__ = ("type", "inputs", "outputs", "attrs", "comment")
    class Var(_message.Message):
        __slots__ = ("name", "comment", "duplicable", "intermediate", "dispensable", "extra", "quant")
        NAME_FIELD_NUMBER: _ClassVar[int]
        COMMENT_FIELD_NUMBER: _ClassVar[int]
        DUPLICABLE_FIELD_NUMBER: _ClassVar[int]
        INTERMEDIATE_FIELD_NUMBER: _ClassVar[int]
        DISPENSABLE_FIELD_NUMBER: _ClassVar[int]
        EXTRA_FIELD_NUMBER: _ClassVar[int]
        QUANT_FIELD_NUMBER: _ClassVar[int]
        name: str
        comment: str
        duplicable: bool
        intermediate: bool
        dispensable: bool
        extra: bool
        quant: bool
        def __init__(self, name: _Optional[str] = ..., comment: _Optional[str] = ..., duplicable: _Optional[bool] = ..., intermediate: _Optional[bool] = ..., dispensable: _Optional[bool] = ..., extra: _Optional[bool] = ..., quant: _Optional[bool] = ...) -> None: ...
    class Attr(_message.Message):
        __slots__ = ("name", "type", "comment", "generated", "extra", "quant", "support_tensor")
        NAME_FIELD_NUMBER: _ClassVar[int]
        TYPE_FIELD_NUMBER: _ClassVar[int]
        COMMENT_FIELD_NUMBER: _ClassVar[int]
        GENERATED_FIELD_NUMBER: _ClassVar[int]
        EXTRA_FIELD_NUMBER: _ClassVar[int]
        QUANT_FIELD_NUMBER: _ClassVar[int]
        SUPPORT_TENSOR_FIELD_NUMBER: _ClassVar[int]
        name: str
        type: AttrType
        comment: str
        generated: bool
        extra: bool
        quant: bool
        support_tensor: bool
        def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[AttrType, str]] = ..., comment: _Optional[str] = ..., generated: _Optional[bool] = ..., extra: _Optional[bool] = ..., quant: _Optional[bool] = ..., support_tensor: _Optional[bool] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    type: str
    inputs: _containers.RepeatedCompositeFieldContainer[OpProto.Var]
    outputs: _containers.RepeatedCompositeFieldContainer[OpProto.Var]
    attrs: _containers.RepeatedCompositeFieldContainer[OpProto.Attr]
    comment: str
    def __init__(self, type: _Optional[str] = ..., inputs: _Optional[_Iterable[_Union[OpProto.Var, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[OpProto.Var, _Mapping]]] = ..., attrs: _Optional[_Iterable[_Union[OpProto.Attr, _Mapping]]] = ..., comment: _Optional[str] = ...) -> None: ...

class VarType(_message.Message):
    __slots__ = ("type", "selected_rows", "lod_tensor", "tensor_array", "reader", "tuple", "string", "strings", "vocab", "sparse_coo")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        BOOL: _ClassVar[VarType.Type]
        INT16: _ClassVar[VarType.Type]
        INT32: _ClassVar[VarType.Type]
        INT64: _ClassVar[VarType.Type]
        FP16: _ClassVar[VarType.Type]
        FP32: _ClassVar[VarType.Type]
        FP64: _ClassVar[VarType.Type]
        SIZE_T: _ClassVar[VarType.Type]
        UINT8: _ClassVar[VarType.Type]
        INT8: _ClassVar[VarType.Type]
        BF16: _ClassVar[VarType.Type]
        COMPLEX64: _ClassVar[VarType.Type]
        COMPLEX128: _ClassVar[VarType.Type]
        LOD_TENSOR: _ClassVar[VarType.Type]
        SELECTED_ROWS: _ClassVar[VarType.Type]
        FEED_MINIBATCH: _ClassVar[VarType.Type]
        FETCH_LIST: _ClassVar[VarType.Type]
        STEP_SCOPES: _ClassVar[VarType.Type]
        LOD_RANK_TABLE: _ClassVar[VarType.Type]
        LOD_TENSOR_ARRAY: _ClassVar[VarType.Type]
        PLACE_LIST: _ClassVar[VarType.Type]
        READER: _ClassVar[VarType.Type]
        RAW: _ClassVar[VarType.Type]
        TUPLE: _ClassVar[VarType.Type]
        STRING: _ClassVar[VarType.Type]
        STRINGS: _ClassVar[VarType.Type]
        VOCAB: _ClassVar[VarType.Type]
        FEED_LIST: _ClassVar[VarType.Type]
        PSTRING: _ClassVar[VarType.Type]
        SPARSE_COO: _ClassVar[VarType.Type]
    BOOL: VarType.Type
    INT16: VarType.Type
    INT32: VarType.Type
    INT64: VarType.Type
    FP16: VarType.Type
    FP32: VarType.Type
    FP64: VarType.Type
    SIZE_T: VarType.Type
    UINT8: VarType.Type
    INT8: VarType.Type
    BF16: VarType.Type
    COMPLEX64: VarType.Type
    COMPLEX128: VarType.Type
    LOD_TENSOR: VarType.Type
    SELECTED_ROWS: VarType.Type
    FEED_MINIBATCH: VarType.Type
    FETCH_LIST: VarType.Type
    STEP_SCOPES: VarType.Type
    LOD_RANK_TABLE: VarType.Type
    LOD_TENSOR_ARRAY: VarType.Type
    PLACE_LIST: VarType.Type
    READER: VarType.Type
    RAW: VarType.Type
    TUPLE: VarType.Type
    STRING: VarType.Type
    STRINGS: VarType.Type
    VOCAB: VarType.Type
    FEED_LIST: VarType.Type
    PSTRING: VarType.Type
    SPARSE_COO: VarType.Type
    class TensorDesc(_message.Message):
        __slots__ = ("data_type", "dims")
        DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
        DIMS_FIELD_NUMBER: _ClassVar[int]
        data_type: VarType.Type
        dims: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, data_type: _Optional[_Union[VarType.Type, str]] = ..., dims: _Optional[_Iterable[int]] = ...) -> None: ...
    class LoDTensorDesc(_message.Message):
        __slots__ = ("tensor", "lod_level")
        TENSOR_FIELD_NUMBER: _ClassVar[int]
        LOD_LEVEL_FIELD_NUMBER: _ClassVar[int]
        tensor: VarType.TensorDesc
        lod_level: int
        def __init__(self, tensor: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., lod_level: _Optional[int] = ...) -> None: ...
    class LoDTensorArrayDesc(_message.Message):
        __slots__ = ("tensor", "lod_level")
        TENSOR_FIELD_NUMBER: _ClassVar[int]
        LOD_LEVEL_FIELD_NUMBER: _ClassVar[int]
        tensor: VarType.TensorDesc
        lod_level: int
        def __init__(self, tensor: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., lod_level: _Optional[int] = ...) -> None: ...
    class ReaderDesc(_message.Message):
        __slots__ = ("lod_tensor",)
        LOD_TENSOR_FIELD_NUMBER: _ClassVar[int]
        lod_tensor: _containers.RepeatedCompositeFieldContainer[VarType.LoDTensorDesc]
        def __init__(self, lod_tensor: _Optional[_Iterable[_Union[VarType.LoDTensorDesc, _Mapping]]] = ...) -> None: ...
    class Tuple(_message.Message):
        __slots__ = ("element_type",)
        ELEMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
        element_type: _containers.RepeatedScalarFieldContainer[VarType.Type]
        def __init__(self, element_type: _Optional[_Iterable[_Union[VarType.Type, str]]] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SELECTED_ROWS_FIELD_NUMBER: _ClassVar[int]
    LOD_TENSOR_FIELD_NUMBER: _ClassVar[int]
    TENSOR_ARRAY_FIELD_NUMBER: _ClassVar[int]
    READER_FIELD_NUMBER: _ClassVar[int]
    TUPLE_FIELD_NUMBER: _ClassVar[int]
    STRING_FIELD_NUMBER: _ClassVar[int]
    STRINGS_FIELD_NUMBER: _ClassVar[int]
    VOCAB_FIELD_NUMBER: _ClassVar[int]
    SPARSE_COO_FIELD_NUMBER: _ClassVar[int]
    type: VarType.Type
    selected_rows: VarType.TensorDesc
    lod_tensor: VarType.LoDTensorDesc
    tensor_array: VarType.LoDTensorArrayDesc
    reader: VarType.ReaderDesc
    tuple: VarType.Tuple
    string: VarType.TensorDesc
    strings: VarType.TensorDesc
    vocab: VarType.TensorDesc
    sparse_coo: VarType.TensorDesc
    def __init__(self, type: _Optional[_Union[VarType.Type, str]] = ..., selected_rows: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., lod_tensor: _Optional[_Union[VarType.LoDTensorDesc, _Mapping]] = ..., tensor_array: _Optional[_Union[VarType.LoDTensorArrayDesc, _Mapping]] = ..., reader: _Optional[_Union[VarType.ReaderDesc, _Mapping]] = ..., tuple: _Optional[_Union[VarType.Tuple, _Mapping]] = ..., string: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., strings: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., vocab: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ..., sparse_coo: _Optional[_Union[VarType.TensorDesc, _Mapping]] = ...) -> None: ...

class VarDesc(_message.Message):
    __slots__ = ("name", "type", "persistable", "need_check_feed", "is_parameter", "stop_gradient", "attrs")
    class Attr(_message.Message):
        __slots__ = ("name", "type", "i", "s", "ints")
        NAME_FIELD_NUMBER: _ClassVar[int]
        TYPE_FIELD_NUMBER: _ClassVar[int]
        I_FIELD_NUMBER: _ClassVar[int]
        S_FIELD_NUMBER: _ClassVar[int]
        INTS_FIELD_NUMBER: _ClassVar[int]
        name: str
        type: AttrType
        i: int
        s: str
        ints: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[AttrType, str]] = ..., i: _Optional[int] = ..., s: _Optional[str] = ..., ints: _Optional[_Iterable[int]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PERSISTABLE_FIELD_NUMBER: _ClassVar[int]
    NEED_CHECK_FEED_FIELD_NUMBER: _ClassVar[int]
    IS_PARAMETER_FIELD_NUMBER: _ClassVar[int]
    STOP_GRADIENT_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: VarType
    persistable: bool
    need_check_feed: bool
    is_parameter: bool
    stop_gradient: bool
    attrs: _containers.RepeatedCompositeFieldContainer[VarDesc.Attr]
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[VarType, _Mapping]] = ..., persistable: _Optional[bool] = ..., need_check_feed: _Optional[bool] = ..., is_parameter: _Optional[bool] = ..., stop_gradient: _Optional[bool] = ..., attrs: _Optional[_Iterable[_Union[VarDesc.Attr, _Mapping]]] = ...) -> None: ...

class BlockDesc(_message.Message):
    __slots__ = ("idx", "parent_idx", "vars", "ops", "forward_block_idx")
    IDX_FIELD_NUMBER: _ClassVar[int]
    PARENT_IDX_FIELD_NUMBER: _ClassVar[int]
    VARS_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    FORWARD_BLOCK_IDX_FIELD_NUMBER: _ClassVar[int]
    idx: int
    parent_idx: int
    vars: _containers.RepeatedCompositeFieldContainer[VarDesc]
    ops: _containers.RepeatedCompositeFieldContainer[OpDesc]
    forward_block_idx: int
    def __init__(self, idx: _Optional[int] = ..., parent_idx: _Optional[int] = ..., vars: _Optional[_Iterable[_Union[VarDesc, _Mapping]]] = ..., ops: _Optional[_Iterable[_Union[OpDesc, _Mapping]]] = ..., forward_block_idx: _Optional[int] = ...) -> None: ...

class OpVersion(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class OpVersionMap(_message.Message):
    __slots__ = ("pair",)
    class OpVersionPair(_message.Message):
        __slots__ = ("op_name", "op_version")
        OP_NAME_FIELD_NUMBER: _ClassVar[int]
        OP_VERSION_FIELD_NUMBER: _ClassVar[int]
        op_name: str
        op_version: OpVersion
        def __init__(self, op_name: _Optional[str] = ..., op_version: _Optional[_Union[OpVersion, _Mapping]] = ...) -> None: ...
    PAIR_FIELD_NUMBER: _ClassVar[int]
    pair: _containers.RepeatedCompositeFieldContainer[OpVersionMap.OpVersionPair]
    def __init__(self, pair: _Optional[_Iterable[_Union[OpVersionMap.OpVersionPair, _Mapping]]] = ...) -> None: ...

class ProgramDesc(_message.Message):
    __slots__ = ("blocks", "version", "op_version_map")
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    OP_VERSION_MAP_FIELD_NUMBER: _ClassVar[int]
    blocks: _containers.RepeatedCompositeFieldContainer[BlockDesc]
    version: Version
    op_version_map: OpVersionMap
    def __init__(self, blocks: _Optional[_Iterable[_Union[BlockDesc, _Mapping]]] = ..., version: _Optional[_Union[Version, _Mapping]] = ..., op_version_map: _Optional[_Union[OpVersionMap, _Mapping]] = ...) -> None: ...
