"""A prediction client of ``ppsvm coordinator serve``: ``ppsvm predict --server`` and :class:`Client`.

The prediction service listens with mutual TLS: a client presents a certificate from the federation's CA with the
client role (``ppsvm split`` writes ``client.pem``/``client.key``; ``ppsvm org init --role client`` makes one for an
organisation), and checks that the service's certificate is the coordinator's. The certificate names the party,
not the host, so the channel tells gRPC which name to expect whatever address it dials: the
``grpc.ssl_target_name_override`` channel option, set to the coordinator's name (``coordinator`` unless the
federation chose another). Writers of their own client need exactly that (and the stubs generated from
``proto/ppsvm.proto``); this module is the reference.

Records are asked by id as the entities publish them: pseudonyms when the entities hold a record-id key. A holder of
that key (``record-ids.key``) may ask by real id and pass the key: the ids are mapped here, never sent in clear.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc

from ppsvm.core.randomness import record_pseudonyms
from ppsvm.errors import ConfigError, EntityError
from ppsvm.wire.certs import CA_FILE, DEFAULT_COORDINATOR_NAME, certificate_file, key_file
from ppsvm.wire.grpc_util import open_channel
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.tls import TlsFiles

__all__ = ["Client", "Prediction"]

# Ids per Predict request: the service batches concurrent requests itself; this bounds one message.
BATCH = 1000


@dataclass(frozen=True)
class Prediction:
    """The service's answer for one record.

    Attributes
    ----------
    id : str
        As asked (the real id when a record-id key mapped it).
    decision : float
        K(x', B') u - gamma (a multiclass model's: the predicted class's one-vs-rest value).
    prediction : float
        +1/-1, the class index, or the regression value.
    label : str
        The declared label or class name ("" for regression).
    probability : float or None
        The calibrated P(positive label), or P(predicted class); None for a model without a calibration.
    """

    id: str
    decision: float
    prediction: float
    label: str
    probability: float | None


class Client:
    """Ask a running ``ppsvm coordinator serve`` for predictions by record id, over mutual TLS.

    Parameters
    ----------
    server : str
        HOST:PORT of the prediction service.
    ca, cert, key : str or Path
        The federation's CA certificate, and this client's certificate and private key (PEM).
    server_name : str, default="coordinator"
        The name in the service's certificate (the federation's coordinator).
    timeout : float, default=60
        Seconds per request.

    Examples
    --------
    >>> with Client.from_bundle("127.0.0.1:50070", "client-bundle") as client:  # doctest: +SKIP
    ...     found, not_found = client.predict(["3f2a...", "9be1..."])
    """

    def __init__(
        self,
        server: str,
        *,
        ca: str | Path,
        cert: str | Path,
        key: str | Path,
        server_name: str = DEFAULT_COORDINATOR_NAME,
        timeout: float = 60.0,
    ) -> None:
        if not timeout > 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout}")
        tls = TlsFiles(Path(ca), Path(cert), Path(key), source=Path(cert).parent)
        tls.read()  # a missing, unreadable or expired file is named now, not at the first request
        self.server, self.timeout = server, timeout
        self._channel = open_channel(server, tls=tls, peer=server_name)
        self._stub = pb_grpc.CoordinatorStub(self._channel)

    @classmethod
    def from_bundle(
        cls,
        server: str,
        bundle: str | Path,
        name: str = "client",
        *,
        server_name: str = DEFAULT_COORDINATOR_NAME,
        timeout: float = 60.0,
    ) -> Client:
        """A client with the files of a client bundle (or a split directory): ca.pem, NAME.pem and NAME.key."""
        directory = Path(bundle)
        return cls(
            server,
            ca=directory / CA_FILE,
            cert=directory / certificate_file(name),
            key=directory / key_file(name),
            server_name=server_name,
            timeout=timeout,
        )

    def predict(self, ids: Sequence[str], id_key: bytes | None = None) -> tuple[list[Prediction], list[str]]:
        """Predictions of the records named by ``ids``, in batches.

        Parameters
        ----------
        ids : sequence of str, length k
            Pseudonyms, or real ids with ``id_key``.
        id_key : bytes, optional
            The federation's record-id key: ``ids`` are real ids, mapped to pseudonyms here.

        Returns
        -------
        found : list of Prediction
            In the order asked, for the ids some row block holds.
        not_found : list of str
            The others, as given.

        Raises
        ------
        EntityError
            The service cannot be reached or refused the request (naming the address and the gRPC status).
        """
        asked = list(ids) if id_key is None else record_pseudonyms(id_key, list(ids))
        given = dict(zip(asked, ids, strict=True))
        found: list[Prediction] = []
        missing: list[str] = []
        for start in range(0, len(asked), BATCH):
            reply = self._call(self._stub.Predict, pb.PredictRequest(ids=asked[start : start + BATCH]))
            found += [
                Prediction(
                    given[p.id],
                    p.decision,
                    p.prediction,
                    p.label,
                    p.probability if p.HasField("probability") else None,
                )
                for p in reply.predictions
            ]
            missing += [given[record] for record in reply.not_found]
        return found, missing

    def status(self) -> pb.StatusReply:
        """The service's model (task, kernel, mbar, entities, private) and the records it has served."""
        reply: pb.StatusReply = self._call(self._stub.Status, pb.Empty())
        return reply

    def _call(self, method: grpc.UnaryUnaryMultiCallable, request: Any) -> Any:
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise EntityError(
                f"the prediction service at {self.server} answered {error.code().name}: {error.details()}"
            ) from None

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
