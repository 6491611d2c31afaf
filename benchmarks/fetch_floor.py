"""The kernel fetch against its floor: where ``Session.kernel``'s time goes, and a bare gRPC stream of the same bytes.

Issue 28 asks for the kernel fetch at 1 GB/s or more over mutual TLS on loopback from 1,000,000 rows, and within
1.5x of a bare gRPC stream of the same bytes. Per size (--rows, training rows, default 1,000,000 and 5,000,000) and
split (--splits, default both):

- ``4x1``: four row blocks, one column block of n_j = 20 features; each entity releases its block on its own (its
  operator consents, as in train_scaling.py: speed is measured here, not privacy): float64, K's bytes once;
- ``2x2``: two row blocks, two column blocks of n_j = 20; the two entities of a row block send masked shares (secure
  aggregation, the default wherever a row block has several entities): uint64, K's bytes twice on the wire.

Gaussian kernel, mbar = 19, at the width entities serve (1/n: no rescaling), synthetic records (benchmarks._shared),
no records held out. Measured:

1. In this process, on one core, over every entity's rows message by message as the pipeline runs (no network):
   what the entities compute (scale to [0, 1] and the kernel, or the log-kernel share), the masking (2x2), the
   writing of the stream's messages (``ppsvm.wire.chunks.encode_rows``, serialised, column-major), their reading
   and folding into K (``RowStream`` reading each message in place, the finiteness check of float blocks, the copy
   into K's rows or the addition mod 2^64) and the decoding of the summed shares (2x2: ``decode_sum`` and exp).
2. In a coordinator process of its own (its peak RSS is then its own), against the split's entities started as
   ``ppsvm entity`` processes: the fetch, ``Session.kernel`` for the training records (after one fetch not timed:
   channels, and 4x1's single-block risk measurement), its wall and CPU seconds, the entities' CPU seconds and the
   coordinator's peak RSS (VmHWM, reset before each fetch) against 2 x K + 200 MiB.
3. The floor, from the same coordinator process: one server process streams the same bytes (the same number of
   streams and of rows each, in messages of the same sizes, serialised once in advance: no ppsvm code, no kernel,
   no copy on the path) and this one client reads them, one channel and call per entity, all at once, over mutual TLS
   with the split's certificates (EC P-256) and ppsvm's keepalive options, each message left as bytes; the same in
   plaintext (what TLS costs) and as one stream.

GB/s are bytes per wall-clock second: K's bytes for the computing parts and the fetch, the bytes on the wire for
serialising, parsing and the floor (twice K's for 2x2). The fetch / floor ratio compares the two walls.

    python -m benchmarks.fetch_floor                          # 1,000,000 and 5,000,000 rows, 4x1 and 2x2
    python -m benchmarks.fetch_floor --quick                  # 200,000 rows (writes fetch_floor-quick.json)
    python -m benchmarks.fetch_floor --rows 1000000 --splits 4x1 --repeats 5

Writes results/fetch_floor.json (a run of some sizes and splits replaces theirs and keeps the others', each
with the machine and load it was measured at). Splitting and starting the entities take most of a run
(5,000,000 rows: about 2 minutes each); the measurements a few seconds per size.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _shared as shared
from benchmarks.aggregation_cost import cpu_seconds_of

NAME = "fetch_floor"
MBAR = shared.MBAR
# n_j = mbar + 1 features per column block: privacy rule 3 (mbar < n_j).
FEATURES_PER_BLOCK = MBAR + 1
SPLITS = {"4x1": (4, 1), "2x2": (2, 2)}
DEFAULT_ROWS, QUICK_ROWS = [1_000_000, 5_000_000], [200_000]
# Issue 28's done-when: the fetch at this rate or more, and within this factor of the floor.
TARGET_GB_S = 1.0
TARGET_RATIO = 1.5
# Issue 12: the coordinator's peak RSS at most twice K plus this much.
MEMORY_SLACK_MIB = 200.0
MiB = 2**20
# Entity processes get this long to start: a 1,250,000-row cell parses for about a minute on 2 cores.
START_TIMEOUT_S = 900.0
FLOOR_SERVICE = "/ppsvm.benchmark.FetchFloor/Stream"


# --- the floor: a bare gRPC stream of the same bytes --------------------------------------------------------------


def floor_messages(rows: int, columns: int) -> Iterator[bytes]:
    """The serialised messages of one entity's stream of ``rows`` x ``columns`` 8-byte numbers, as the entity sends
    them (the header with the first rows, then whole rows up to ``CHUNK_BYTES`` a message); contents zero."""
    from ppsvm.wire.chunks import encode_rows, rows_per_message
    from ppsvm.wire.rpc import ppsvm_pb2 as pb

    per_message = rows_per_message(columns, 8)
    first = min(rows, per_message)
    yield from encode_rows(
        "kernel", (rows, columns), np.dtype(np.float64), [np.zeros((first, columns))], column_major=True
    )
    full = pb.ArrayChunk(data=bytes(per_message * columns * 8)).SerializeToString()
    for start in range(first, rows, per_message):
        count = min(per_message, rows - start)
        yield full if count == per_message else pb.ArrayChunk(data=bytes(count * columns * 8)).SerializeToString()


def serve_floor(cert_dir: Path) -> None:
    """Serve the floor stream on two loopback ports, mutual TLS and plaintext; print both, serve until killed.

    A request is ``b"rows,columns"``; the reply streams :func:`floor_messages`, each message serialised once per
    request before the first is sent, so that the stream itself runs no Python beyond handing bytes on.
    """
    import grpc

    from ppsvm.wire.grpc_util import SERVER_KEEPALIVE_OPTIONS
    from ppsvm.wire.tls import TlsFiles, server_credentials

    def stream(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        rows, columns = (int(x) for x in request.split(b","))
        yield from list(floor_messages(rows, columns))

    handler = grpc.method_handlers_generic_handler(
        FLOOR_SERVICE.split("/")[1], {"Stream": grpc.unary_stream_rpc_method_handler(stream)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=SERVER_KEEPALIVE_OPTIONS)
    server.add_generic_rpc_handlers([handler])
    tls = TlsFiles(cert_dir / "ca.pem", cert_dir / "r0c0.pem", cert_dir / "r0c0.key", cert_dir)
    secure = server.add_secure_port("127.0.0.1:0", server_credentials(tls))
    plain = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"{secure} {plain}", flush=True)
    server.wait_for_termination()


def floor_runs(
    cert_dir: Path, streams: list[int], columns: int, repeats: int
) -> dict[str, list[dict[str, float | list[float]]]]:
    """Time the floor: ``streams`` (rows per stream) read at once over TLS and in plaintext, and all rows as one.

    Returns
    -------
    dict
        Per way of reading ("tls", "plaintext", "tls, one stream"), one entry per repeat: wall and this process's
        CPU seconds, the server's CPU seconds, the bytes received and the load average.
    """
    import grpc

    from ppsvm.wire.grpc_util import KEEPALIVE_OPTIONS
    from ppsvm.wire.tls import TlsFiles, channel_credentials

    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.fetch_floor", "--floor-server", str(cert_dir)],
        cwd=shared.ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        secure_port, plain_port = (int(x) for x in server.stdout.readline().split())
        tls = TlsFiles(cert_dir / "ca.pem", cert_dir / "coordinator.pem", cert_dir / "coordinator.key", cert_dir)

        def channel(secure: bool) -> grpc.Channel:
            if secure:
                return grpc.secure_channel(
                    f"127.0.0.1:{secure_port}",
                    channel_credentials(tls),
                    options=[("grpc.ssl_target_name_override", "r0c0"), *KEEPALIVE_OPTIONS],
                )
            return grpc.insecure_channel(f"127.0.0.1:{plain_port}", options=KEEPALIVE_OPTIONS)

        ways = {"tls": (True, streams), "plaintext": (False, streams), "tls, one stream": (True, [sum(streams)])}
        results: dict[str, list[dict[str, float | list[float]]]] = {}
        for way, (secure, sizes) in ways.items():
            channels = [channel(secure) for _ in sizes]
            # No serialisers: the requests and replies are the raw bytes.
            calls: list[grpc.UnaryStreamMultiCallable[bytes, bytes]] = [
                c.unary_stream(FLOOR_SERVICE, request_serializer=None, response_deserializer=None) for c in channels
            ]

            def read(call: Callable[..., Any], rows: int) -> int:
                return sum(len(message) for message in call(f"{rows},{columns}".encode()))

            results[way] = []
            with futures.ThreadPoolExecutor(max_workers=len(sizes)) as pool:
                for run in range(repeats + 1):  # the first opens the connections: not counted
                    load = shared.load_average()
                    server_cpu = cpu_seconds_of(server.pid)
                    cpu, started = time.process_time(), time.perf_counter()
                    received = sum(pool.map(read, calls, sizes))
                    wall = time.perf_counter() - started
                    if run:
                        results[way].append(
                            {
                                "wall_s": wall,
                                "cpu_s": time.process_time() - cpu,
                                "server_cpu_s": cpu_seconds_of(server.pid) - server_cpu,
                                "bytes": received,
                                "load_average": load,
                            }
                        )
            for c in channels:
                c.close()
        return results
    finally:
        server.kill()
        server.wait()


# --- the fetch, in a coordinator process ---------------------------------------------------------------------------


def coordinator_worker(federation_path: Path, out: Path, repeats: int) -> None:
    """Start the split's entities, time the fetch ``repeats`` times and the floor; write the figures to ``out``."""
    from ppsvm.config import federation_at_addresses, load_federation
    from ppsvm.coordinator.federation import Session
    from ppsvm.memory import limit_malloc_arenas, release_free_memory
    from ppsvm.processes import EntityProcesses

    limit_malloc_arenas()  # as the ppsvm command does: this process stands for `ppsvm coordinator train`
    logging.basicConfig(level=logging.WARNING)
    planned = load_federation(federation_path)
    split_dir = federation_path.parent
    figures: dict[str, Any] = {"fetches": []}
    started = time.perf_counter()
    configs = [split_dir / f"{e.id}.toml" for e in planned.entities]
    with EntityProcesses(configs, start_timeout=START_TIMEOUT_S) as running:
        figures["entity_start_s"] = time.perf_counter() - started
        live = split_dir / "federation.live.toml"
        live.write_text(federation_at_addresses(planned, running.addresses), encoding="utf-8")
        with Session(load_federation(live)) as session:
            blocks, scaling = session.survey()
            # As train() does: only what the fetch needs of the records stays, and glibc hands the rest back.
            blocks = [block.without_ids() for block in blocks]
            release_free_memory()
            mu = session.fetch_width("gaussian")

            def fetch() -> np.ndarray:
                return session.kernel("gaussian", MBAR, mu, scaling, blocks, "train")

            K = fetch()
            figures["k_bytes"] = K.nbytes
            figures["rows"] = K.shape[0]
            del K
            for _ in range(repeats):
                release_free_memory()
                shared.reset_peak_rss()
                rss_before = shared.proc_status()["VmRSS"]
                load = shared.load_average()
                entity_cpu = [cpu_seconds_of(p.pid) for p in running.processes]
                cpu, begun = time.process_time(), time.perf_counter()
                K = fetch()
                wall = time.perf_counter() - begun
                figures["fetches"].append(
                    {
                        "wall_s": wall,
                        "cpu_s": time.process_time() - cpu,
                        "entity_cpu_s": sum(
                            cpu_seconds_of(p.pid) - before
                            for p, before in zip(running.processes, entity_cpu, strict=True)
                        ),
                        "rss_before_mib": rss_before,
                        "peak_rss_mib": shared.peak_rss_mib(),
                        "load_average": load,
                    }
                )
                del K
            sizes = {block.row_block: block.size("train") for block in blocks}
            streams = [sizes[e.row_block] for e in planned.entities]
    figures["wire_bytes"] = sum(streams) * MBAR * 8
    figures["floor"] = floor_runs(split_dir, streams, MBAR, repeats)
    out.write_text(json.dumps(figures), encoding="utf-8")


# --- the parts, in this process --------------------------------------------------------------------------------------


def entity_rows(X: np.ndarray, row_blocks: int, column_blocks: int) -> list[tuple[int, np.ndarray]]:
    """Each entity's (first row of K, its cell): ``X`` cut into ``row_blocks`` x ``column_blocks`` blocks, row-major.

    Parameters
    ----------
    X : ndarray, shape (m, column_blocks * FEATURES_PER_BLOCK)
    """
    bounds = np.linspace(0, len(X), row_blocks + 1).astype(int)
    return [
        (int(bounds[i]), X[bounds[i] : bounds[i + 1], j * FEATURES_PER_BLOCK : (j + 1) * FEATURES_PER_BLOCK])
        for i in range(row_blocks)
        for j in range(column_blocks)
    ]


class Clock:
    """Wall-clock and CPU seconds per part, added up over ``with clock("part"):`` blocks.

    The CPU seconds (this process; the parts run on one thread) move less than the wall-clock ones when other
    work shares the machine.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, part: str) -> Iterator[None]:
        begun, cpu = time.perf_counter(), time.process_time()
        yield
        self.seconds[part] = self.seconds.get(part, 0.0) + time.perf_counter() - begun
        self.cpu[part] = self.cpu.get(part, 0.0) + time.process_time() - cpu


def parts(X: np.ndarray, split: str) -> dict[str, dict[str, float]]:
    """Seconds of each part of the fetch over every entity's rows, in this process, one after the other.

    Parameters
    ----------
    X : ndarray, shape (m, n)
        The records, n = FEATURES_PER_BLOCK per column block.
    split : {"4x1", "2x2"}

    Returns
    -------
    dict
        "wall" and "cpu": each part's seconds ("compute", "masking" (2x2), "serialise", "parse and fold",
        "decode" (2x2)).
    """
    from ppsvm.core.aggregation import decode_sum, log_share, mask_context, masked_shares
    from ppsvm.core.kernels import kernel, scale_to_unit
    from ppsvm.wire.chunks import RowStream, encode_rows, rows_per_message

    column_blocks = SPLITS[split][1]
    masked = column_blocks > 1
    mu = 1.0 / X.shape[1]
    B = np.random.default_rng(1).random((MBAR, FEATURES_PER_BLOCK))
    low, high = X.min(axis=0), X.max(axis=0)
    K = np.zeros((len(X), MBAR), order="F")
    sums = K.view(np.uint64)
    per_message = rows_per_message(MBAR, 8)
    dtype = np.dtype(np.uint64 if masked else np.float64)
    clock = Clock()

    def batches(cell: np.ndarray, j: int) -> Iterator[np.ndarray]:
        """The entity's batches as it computes them (ppsvm.entity.cell.EntityCore.kernel_stream), timed."""
        features = slice(j * FEATURES_PER_BLOCK, (j + 1) * FEATURES_PER_BLOCK)
        if not masked:
            for start in range(0, len(cell), per_message):
                with clock("compute"):
                    scaled = scale_to_unit(cell[start : start + per_message], low[features], high[features])
                    batch = kernel("gaussian", B, scaled, mu).T
                yield batch
            return
        with clock("compute"):
            share = log_share("gaussian", scale_to_unit(cell, low[features], high[features]), B, mu)
        peers = {f"e{k}": bytes(32) for k in range(column_blocks) if k != j}
        masking = masked_shares(share, f"e{j}", peers, mask_context(b"", b"", {}))
        while True:
            with clock("masking"):
                masked_batch = next(masking, None)  # not ``batch``: that name holds an array, never None
            if masked_batch is None:
                return
            yield masked_batch

    # Message by message, as the pipeline runs: each is written, then read and folded into K before the next.
    for number, (offset, cell) in enumerate(entity_rows(X, *SPLITS[split])):
        start = offset
        for batch in batches(cell, number % column_blocks):
            with clock("serialise"):
                messages = list(encode_rows("kernel", batch.shape, dtype, [batch], column_major=True))
            with clock("parse and fold"):
                for rows in RowStream(messages, "kernel"):
                    target = slice(start, start + len(rows))
                    if masked:
                        np.add(sums[target], rows, out=sums[target])
                    elif np.isfinite(rows).all():
                        K[target] = rows
                    else:
                        raise AssertionError("a kernel block with non-finite entries")
                    start += len(rows)
    if masked:
        with clock("decode"):
            np.exp(decode_sum(sums), out=K)
    return {"wall": clock.seconds, "cpu": clock.cpu}


# --- the driver ---------------------------------------------------------------------------------------------------


def make_split(X: np.ndarray, y: np.ndarray, split: str, out_dir: Path, seed: int) -> Path:
    """Write ``split`` of (X, y), no records held out; the federation file. 4x1's entities consent to releasing
    their blocks on their own (no row-block peer to combine with)."""
    from ppsvm.config import SINGLE_BLOCK_CONSENT_KEY
    from ppsvm.data.dataset import Dataset
    from ppsvm.data.partition import SplitOptions, split_dataset

    row_blocks, column_blocks = SPLITS[split]
    names = tuple(f"x{k}" for k in range(X.shape[1]))
    dataset = Dataset(np.arange(len(y)).astype(str), X, y, names, f"synthetic(seed={seed}, n_features={len(names)})")
    options = SplitOptions(row_blocks, column_blocks, out_dir, test_fraction=0.0, seed=seed, overwrite=True)
    result = split_dataset(dataset, options)
    if column_blocks == 1:
        for path in result.entity_config_paths:
            with path.open("a", encoding="utf-8") as handle:
                handle.write(f"\n[privacy]\n{SINGLE_BLOCK_CONSENT_KEY} = true\n")
    return result.federation_path


def rate(nbytes: float, seconds: float) -> str:
    return f"{nbytes / seconds / 1e9:.2f} GB/s"


def report(case: dict[str, Any]) -> str:
    """One size and split's table: each part's seconds and GB/s, the fetch, the floors, the ratio and the memory."""
    k_bytes, wire_bytes = case["k_bytes"], case["wire_bytes"]
    # Every entity's rows pass through each part (twice K's for 2x2) but the decoding of the sums.
    rows = [
        [
            f"  {part} (CPU {case['parts_cpu'][part]:.3f} s)",
            f"{seconds:.3f} s",
            rate(k_bytes if part == "decode" else wire_bytes, seconds),
        ]
        for part, seconds in case["parts"].items()
    ]
    rows.append(
        [
            f"  sum of the parts, one core (CPU {sum(case['parts_cpu'].values()):.3f} s)",
            f"{sum(case['parts'].values()):.3f} s",
            "",
        ]
    )
    fetch = [run["wall_s"] for run in case["fetches"]]
    rows.append(
        [
            "fetch: Session.kernel, mutual TLS (median)",
            f"{shared.median(fetch):.3f} s",
            rate(k_bytes, shared.median(fetch)) + f" of K, {rate(wire_bytes, shared.median(fetch))} on the wire",
        ]
    )
    rows.append(
        [
            "  coordinator CPU / entities' CPU",
            f"{shared.median([r['cpu_s'] for r in case['fetches']]):.3f} / "
            f"{shared.median([r['entity_cpu_s'] for r in case['fetches']]):.3f} s",
            "",
        ]
    )
    for way, runs in case["floor"].items():
        wall = shared.median([run["wall_s"] for run in runs])
        cpu = shared.median([run["cpu_s"] for run in runs])
        server = shared.median([run["server_cpu_s"] for run in runs])
        rows.append(
            [f"floor, {way} (client / server CPU {cpu:.2f} / {server:.2f} s)", f"{wall:.3f} s", rate(wire_bytes, wall)]
        )
    rows.append(["fetch / floor (tls)", f"{case['ratio']:.2f}x", ""])
    peak = shared.median([r["peak_rss_mib"] for r in case["fetches"]])
    rows.append(
        [
            "coordinator peak RSS during the fetch / bound 2 x K + 200 MiB",
            f"{peak:.0f} / {2 * k_bytes / MiB + MEMORY_SLACK_MIB:.0f} MiB",
            f"(RSS before {shared.median([r['rss_before_mib'] for r in case['fetches']]):.0f} MiB)",
        ]
    )
    loads = [run["load_average"][0] for run in case["fetches"] if run["load_average"]]
    title = (
        f"{case['rows']:,} rows, {case['split']} (K {k_bytes / MiB:.0f} MiB; load average during the fetches "
        f"{min(loads, default=0):.1f}-{max(loads, default=0):.1f})"
    )
    return title + "\n" + shared.table(["part", "time", "rate"], rows)


def measure(rows: int, split: str, repeats: int, seed: int, work: Path) -> dict[str, Any]:
    """Split, time the parts in this process, then the fetch and the floor in a coordinator process."""
    column_blocks = SPLITS[split][1]
    X, y = shared.synthetic(rows, seed, column_blocks * FEATURES_PER_BLOCK)
    begun = time.perf_counter()
    federation = make_split(X, y, split, work / f"{split}-{rows}", seed)
    split_s = time.perf_counter() - begun
    print(f"{rows:,} rows, {split}: split in {split_s:.0f} s; timing the parts ...", flush=True)
    timings = [parts(X, split) for _ in range(repeats)]
    del X, y
    gc.collect()
    out = work / f"{split}-{rows}.json"
    subprocess.run(
        [sys.executable, "-m", "benchmarks.fetch_floor", "--coordinator", str(federation), str(out), str(repeats)],
        cwd=shared.ROOT,
        check=True,
    )
    case: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    case.update(rows=rows, split=split, split_s=split_s)
    case["parts"] = {part: shared.median([t["wall"][part] for t in timings]) for part in timings[0]["wall"]}
    case["parts_cpu"] = {part: shared.median([t["cpu"][part] for t in timings]) for part in timings[0]["cpu"]}
    case["parts_runs"] = timings
    fetch = shared.median([run["wall_s"] for run in case["fetches"]])
    floor = shared.median([run["wall_s"] for run in case["floor"]["tls"]])
    case["ratio"] = fetch / floor
    case["fetch_gb_s"] = case["k_bytes"] / fetch / 1e9
    case["peak_within_bound"] = shared.median([r["peak_rss_mib"] for r in case["fetches"]]) <= (
        2 * case["k_bytes"] / MiB + MEMORY_SLACK_MIB
    )
    return case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", help="training rows (default 1,000,000 and 5,000,000)")
    parser.add_argument("--splits", nargs="+", choices=list(SPLITS), default=list(SPLITS))
    parser.add_argument("--repeats", type=int, default=3, help="timed fetches, floors and parts per case (default 3)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS[0]:,} rows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--floor-server", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--coordinator", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.floor_server:
        serve_floor(args.floor_server)
        return 0
    if args.coordinator:
        federation, out, repeats = args.coordinator
        coordinator_worker(Path(federation), Path(out), int(repeats))
        return 0
    sizes = args.rows or (QUICK_ROWS if args.quick else DEFAULT_ROWS)
    info = shared.machine_info()
    shared.print_machine(info)
    started = time.perf_counter()
    cases = []
    with tempfile.TemporaryDirectory(prefix="ppsvm-fetch-floor-") as temporary:
        for rows in sizes:
            for split in args.splits:
                case = measure(rows, split, args.repeats, args.seed, Path(temporary))
                cases.append(case)
                print("\n" + report(case) + "\n", flush=True)
    if not args.quick:
        cases = shared.with_earlier_runs(NAME, "cases", cases, key=lambda case: (case["rows"], case["split"]))
    verdicts = []
    for case in cases:
        if case["rows"] >= 1_000_000:
            fast = case["fetch_gb_s"] >= TARGET_GB_S and case["ratio"] <= TARGET_RATIO
            verdicts.append(
                f"{case['rows']:,} rows {case['split']}: {case['fetch_gb_s']:.2f} GB/s, {case['ratio']:.2f}x the "
                f"floor: {'PASS' if fast else 'FAIL'} (>= {TARGET_GB_S:g} GB/s and <= {TARGET_RATIO}x); peak RSS "
                f"{'within' if case['peak_within_bound'] else 'OVER'} 2 x K + {MEMORY_SLACK_MIB:.0f} MiB"
            )
    for verdict in verdicts:
        print(verdict)
    info["load_average_at_end"] = shared.load_average()
    info["wall_clock_s"] = time.perf_counter() - started
    setting = {
        "mbar": MBAR,
        "n_j": FEATURES_PER_BLOCK,
        "kernel": "gaussian",
        "repeats": args.repeats,
        "seed": args.seed,
    }
    path = shared.write_json(
        NAME, {"machine": info, "setting": setting, "cases": cases, "targets": verdicts}, args.quick
    )
    print(f"wrote {path.relative_to(shared.ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
