from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RecordSet(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECORD_SET_UNSPECIFIED: _ClassVar[RecordSet]
    TRAIN: _ClassVar[RecordSet]
    TEST: _ClassVar[RecordSet]

class KernelKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KERNEL_UNSPECIFIED: _ClassVar[KernelKind]
    LINEAR: _ClassVar[KernelKind]
    GAUSSIAN: _ClassVar[KernelKind]
RECORD_SET_UNSPECIFIED: RecordSet
TRAIN: RecordSet
TEST: RecordSet
KERNEL_UNSPECIFIED: KernelKind
LINEAR: KernelKind
GAUSSIAN: KernelKind

class ArrayHeader(_message.Message):
    __slots__ = ("name", "dtype", "shape", "column_major")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    COLUMN_MAJOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    column_major: bool
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., column_major: _Optional[bool] = ...) -> None: ...

class ArrayChunk(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: ArrayHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[ArrayHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BlockMetadata(_message.Message):
    __slots__ = ("entity_id", "column_block", "n_features", "n_train", "n_test", "has_labels", "non_private_override", "ppsvm_version", "secret_check", "features_check", "mode", "pinned_basis", "releases", "epsilon_total", "epsilon_spent", "id_key_check", "epoch", "pinned_mbar", "points_used", "chain_head", "chain_root", "label_names", "scoring_source")
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    COLUMN_BLOCK_FIELD_NUMBER: _ClassVar[int]
    N_FEATURES_FIELD_NUMBER: _ClassVar[int]
    N_TRAIN_FIELD_NUMBER: _ClassVar[int]
    N_TEST_FIELD_NUMBER: _ClassVar[int]
    HAS_LABELS_FIELD_NUMBER: _ClassVar[int]
    NON_PRIVATE_OVERRIDE_FIELD_NUMBER: _ClassVar[int]
    PPSVM_VERSION_FIELD_NUMBER: _ClassVar[int]
    SECRET_CHECK_FIELD_NUMBER: _ClassVar[int]
    FEATURES_CHECK_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PINNED_BASIS_FIELD_NUMBER: _ClassVar[int]
    RELEASES_FIELD_NUMBER: _ClassVar[int]
    EPSILON_TOTAL_FIELD_NUMBER: _ClassVar[int]
    EPSILON_SPENT_FIELD_NUMBER: _ClassVar[int]
    ID_KEY_CHECK_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PINNED_MBAR_FIELD_NUMBER: _ClassVar[int]
    POINTS_USED_FIELD_NUMBER: _ClassVar[int]
    CHAIN_HEAD_FIELD_NUMBER: _ClassVar[int]
    CHAIN_ROOT_FIELD_NUMBER: _ClassVar[int]
    LABEL_NAMES_FIELD_NUMBER: _ClassVar[int]
    SCORING_SOURCE_FIELD_NUMBER: _ClassVar[int]
    entity_id: str
    column_block: int
    n_features: int
    n_train: int
    n_test: int
    has_labels: bool
    non_private_override: bool
    ppsvm_version: str
    secret_check: str
    features_check: str
    mode: str
    pinned_basis: str
    releases: int
    epsilon_total: float
    epsilon_spent: float
    id_key_check: str
    epoch: int
    pinned_mbar: int
    points_used: int
    chain_head: str
    chain_root: str
    label_names: _containers.RepeatedScalarFieldContainer[str]
    scoring_source: str
    def __init__(self, entity_id: _Optional[str] = ..., column_block: _Optional[int] = ..., n_features: _Optional[int] = ..., n_train: _Optional[int] = ..., n_test: _Optional[int] = ..., has_labels: _Optional[bool] = ..., non_private_override: _Optional[bool] = ..., ppsvm_version: _Optional[str] = ..., secret_check: _Optional[str] = ..., features_check: _Optional[str] = ..., mode: _Optional[str] = ..., pinned_basis: _Optional[str] = ..., releases: _Optional[int] = ..., epsilon_total: _Optional[float] = ..., epsilon_spent: _Optional[float] = ..., id_key_check: _Optional[str] = ..., epoch: _Optional[int] = ..., pinned_mbar: _Optional[int] = ..., points_used: _Optional[int] = ..., chain_head: _Optional[str] = ..., chain_root: _Optional[str] = ..., label_names: _Optional[_Iterable[str]] = ..., scoring_source: _Optional[str] = ...) -> None: ...

class LogDigestRequest(_message.Message):
    __slots__ = ("release",)
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    release: int
    def __init__(self, release: _Optional[int] = ...) -> None: ...

class LogDigestReply(_message.Message):
    __slots__ = ("release", "digest")
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    release: int
    digest: str
    def __init__(self, release: _Optional[int] = ..., digest: _Optional[str] = ...) -> None: ...

class SignedRange(_message.Message):
    __slots__ = ("entity_id", "low", "high", "tag")
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    entity_id: str
    low: _containers.RepeatedScalarFieldContainer[float]
    high: _containers.RepeatedScalarFieldContainer[float]
    tag: str
    def __init__(self, entity_id: _Optional[str] = ..., low: _Optional[_Iterable[float]] = ..., high: _Optional[_Iterable[float]] = ..., tag: _Optional[str] = ...) -> None: ...

class Scaling(_message.Message):
    __slots__ = ("ranges",)
    RANGES_FIELD_NUMBER: _ClassVar[int]
    ranges: _containers.RepeatedCompositeFieldContainer[SignedRange]
    def __init__(self, ranges: _Optional[_Iterable[_Union[SignedRange, _Mapping]]] = ...) -> None: ...

class KernelRequest(_message.Message):
    __slots__ = ("kernel", "mbar", "mu", "scaling", "record_set", "ids", "nonce", "epoch", "column_major")
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    MBAR_FIELD_NUMBER: _ClassVar[int]
    MU_FIELD_NUMBER: _ClassVar[int]
    SCALING_FIELD_NUMBER: _ClassVar[int]
    RECORD_SET_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    COLUMN_MAJOR_FIELD_NUMBER: _ClassVar[int]
    kernel: KernelKind
    mbar: int
    mu: float
    scaling: Scaling
    record_set: RecordSet
    ids: RecordIds
    nonce: bytes
    epoch: int
    column_major: bool
    def __init__(self, kernel: _Optional[_Union[KernelKind, str]] = ..., mbar: _Optional[int] = ..., mu: _Optional[float] = ..., scaling: _Optional[_Union[Scaling, _Mapping]] = ..., record_set: _Optional[_Union[RecordSet, str]] = ..., ids: _Optional[_Union[RecordIds, _Mapping]] = ..., nonce: _Optional[bytes] = ..., epoch: _Optional[int] = ..., column_major: _Optional[bool] = ...) -> None: ...

class RecordIds(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ModelMessage(_message.Message):
    __slots__ = ("model_json",)
    MODEL_JSON_FIELD_NUMBER: _ClassVar[int]
    model_json: bytes
    def __init__(self, model_json: _Optional[bytes] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class BaselineRequest(_message.Message):
    __slots__ = ("task", "kernel", "nu", "mu", "seed", "search", "leave_one_out")
    TASK_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    NU_FIELD_NUMBER: _ClassVar[int]
    MU_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    LEAVE_ONE_OUT_FIELD_NUMBER: _ClassVar[int]
    task: str
    kernel: KernelKind
    nu: float
    mu: float
    seed: int
    search: str
    leave_one_out: bool
    def __init__(self, task: _Optional[str] = ..., kernel: _Optional[_Union[KernelKind, str]] = ..., nu: _Optional[float] = ..., mu: _Optional[float] = ..., seed: _Optional[int] = ..., search: _Optional[str] = ..., leave_one_out: _Optional[bool] = ...) -> None: ...

class BaselineReply(_message.Message):
    __slots__ = ("entity_id", "n_train", "n_test", "error_rate", "auc", "relative_error", "rmse")
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    N_TRAIN_FIELD_NUMBER: _ClassVar[int]
    N_TEST_FIELD_NUMBER: _ClassVar[int]
    ERROR_RATE_FIELD_NUMBER: _ClassVar[int]
    AUC_FIELD_NUMBER: _ClassVar[int]
    RELATIVE_ERROR_FIELD_NUMBER: _ClassVar[int]
    RMSE_FIELD_NUMBER: _ClassVar[int]
    entity_id: str
    n_train: int
    n_test: int
    error_rate: float
    auc: float
    relative_error: float
    rmse: float
    def __init__(self, entity_id: _Optional[str] = ..., n_train: _Optional[int] = ..., n_test: _Optional[int] = ..., error_rate: _Optional[float] = ..., auc: _Optional[float] = ..., relative_error: _Optional[float] = ..., rmse: _Optional[float] = ...) -> None: ...

class DpRequest(_message.Message):
    __slots__ = ("method", "mechanism", "epsilon", "c", "n_frequencies", "rho", "low", "high", "huber_h")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    C_FIELD_NUMBER: _ClassVar[int]
    N_FREQUENCIES_FIELD_NUMBER: _ClassVar[int]
    RHO_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    HUBER_H_FIELD_NUMBER: _ClassVar[int]
    method: str
    mechanism: str
    epsilon: float
    c: float
    n_frequencies: int
    rho: _containers.RepeatedScalarFieldContainer[float]
    low: _containers.RepeatedScalarFieldContainer[float]
    high: _containers.RepeatedScalarFieldContainer[float]
    huber_h: float
    def __init__(self, method: _Optional[str] = ..., mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., c: _Optional[float] = ..., n_frequencies: _Optional[int] = ..., rho: _Optional[_Iterable[float]] = ..., low: _Optional[_Iterable[float]] = ..., high: _Optional[_Iterable[float]] = ..., huber_h: _Optional[float] = ...) -> None: ...

class DpReply(_message.Message):
    __slots__ = ("entity_id", "n_train", "weights", "mechanism", "epsilon", "noise", "budget_remaining")
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    N_TRAIN_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    NOISE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_REMAINING_FIELD_NUMBER: _ClassVar[int]
    entity_id: str
    n_train: int
    weights: _containers.RepeatedScalarFieldContainer[float]
    mechanism: str
    epsilon: float
    noise: str
    budget_remaining: float
    def __init__(self, entity_id: _Optional[str] = ..., n_train: _Optional[int] = ..., weights: _Optional[_Iterable[float]] = ..., mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., noise: _Optional[str] = ..., budget_remaining: _Optional[float] = ...) -> None: ...

class DpEvaluateRequest(_message.Message):
    __slots__ = ("model_json", "epsilon")
    MODEL_JSON_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    model_json: bytes
    epsilon: float
    def __init__(self, model_json: _Optional[bytes] = ..., epsilon: _Optional[float] = ...) -> None: ...

class DpEvaluateReply(_message.Message):
    __slots__ = ("entity_id", "n_test", "error_rate", "epsilon", "noise", "budget_remaining")
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    N_TEST_FIELD_NUMBER: _ClassVar[int]
    ERROR_RATE_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    NOISE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_REMAINING_FIELD_NUMBER: _ClassVar[int]
    entity_id: str
    n_test: int
    error_rate: float
    epsilon: float
    noise: str
    budget_remaining: float
    def __init__(self, entity_id: _Optional[str] = ..., n_test: _Optional[int] = ..., error_rate: _Optional[float] = ..., epsilon: _Optional[float] = ..., noise: _Optional[str] = ..., budget_remaining: _Optional[float] = ...) -> None: ...

class DpHistogramRequest(_message.Message):
    __slots__ = ("model_json", "edges", "epsilon")
    MODEL_JSON_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    model_json: bytes
    edges: _containers.RepeatedScalarFieldContainer[float]
    epsilon: float
    def __init__(self, model_json: _Optional[bytes] = ..., edges: _Optional[_Iterable[float]] = ..., epsilon: _Optional[float] = ...) -> None: ...

class DpHistogramReply(_message.Message):
    __slots__ = ("entity_id", "n_train", "negative_counts", "positive_counts", "epsilon", "noise", "budget_remaining")
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    N_TRAIN_FIELD_NUMBER: _ClassVar[int]
    NEGATIVE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    POSITIVE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    NOISE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_REMAINING_FIELD_NUMBER: _ClassVar[int]
    entity_id: str
    n_train: int
    negative_counts: _containers.RepeatedScalarFieldContainer[int]
    positive_counts: _containers.RepeatedScalarFieldContainer[int]
    epsilon: float
    noise: str
    budget_remaining: float
    def __init__(self, entity_id: _Optional[str] = ..., n_train: _Optional[int] = ..., negative_counts: _Optional[_Iterable[int]] = ..., positive_counts: _Optional[_Iterable[int]] = ..., epsilon: _Optional[float] = ..., noise: _Optional[str] = ..., budget_remaining: _Optional[float] = ...) -> None: ...

class PredictRequest(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ...) -> None: ...

class Prediction(_message.Message):
    __slots__ = ("id", "decision", "prediction", "label", "probability")
    ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    PREDICTION_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    id: str
    decision: float
    prediction: float
    label: str
    probability: float
    def __init__(self, id: _Optional[str] = ..., decision: _Optional[float] = ..., prediction: _Optional[float] = ..., label: _Optional[str] = ..., probability: _Optional[float] = ...) -> None: ...

class PredictReply(_message.Message):
    __slots__ = ("predictions", "not_found")
    PREDICTIONS_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    predictions: _containers.RepeatedCompositeFieldContainer[Prediction]
    not_found: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, predictions: _Optional[_Iterable[_Union[Prediction, _Mapping]]] = ..., not_found: _Optional[_Iterable[str]] = ...) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("task", "kernel", "mbar", "n_entities", "private", "requests_served")
    TASK_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    MBAR_FIELD_NUMBER: _ClassVar[int]
    N_ENTITIES_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_SERVED_FIELD_NUMBER: _ClassVar[int]
    task: str
    kernel: str
    mbar: int
    n_entities: int
    private: bool
    requests_served: int
    def __init__(self, task: _Optional[str] = ..., kernel: _Optional[str] = ..., mbar: _Optional[int] = ..., n_entities: _Optional[int] = ..., private: _Optional[bool] = ..., requests_served: _Optional[int] = ...) -> None: ...
