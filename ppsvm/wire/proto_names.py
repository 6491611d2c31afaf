"""The names the code uses for the proto's enum values, each mapping written once and its inverse derived.

The coordinator writes requests by name (:data:`KERNEL_KINDS`, :data:`RECORD_SETS`); the entity reads
them back (:data:`KERNEL_NAMES`, :data:`RECORD_SET_NAMES`). A value missing from an inverse is one the
proto's ``*_UNSPECIFIED`` default or a newer peer sent: the entity refuses it as a bad request.
"""

from __future__ import annotations

from collections.abc import Mapping

from ppsvm.wire.rpc import ppsvm_pb2 as pb

KERNEL_KINDS: Mapping[str, pb.KernelKind] = {"linear": pb.LINEAR, "gaussian": pb.GAUSSIAN}
KERNEL_NAMES: Mapping[int, str] = {kind: name for name, kind in KERNEL_KINDS.items()}
RECORD_SETS: Mapping[str, pb.RecordSet] = {"train": pb.TRAIN, "test": pb.TEST}
RECORD_SET_NAMES: Mapping[int, str] = {kind: name for name, kind in RECORD_SETS.items()}
