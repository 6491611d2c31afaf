"""An entity's own Prometheus metrics: what it has released and the privacy budget it has left.

Read from the release guard at each scrape (:class:`EntityCollector`), so the figures are the ones the
release log holds, not a second count that could drift from it. Labels: the entity id, its mode and a
release's RPC name (one of the RPCs an entity serves); never a record, a basis fingerprint (it hashes the
column block's scaling, which comes from the records) or anything else derived from data.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ppsvm.entity.guard import ENTITY_RPCS, ReleaseGuard, epsilon_of


class EntityCollector(Collector):
    """Metrics of one entity's release guard.

    - ``ppsvm_entity_info{entity,mode,column_block}``: 1;
    - ``ppsvm_entity_releases_total{entity,rpc}``: releases recorded in the log, by RPC (the whole log,
      earlier runs included);
    - ``ppsvm_entity_epsilon_spent{entity}``: DP budget spent;
    - ``ppsvm_entity_epsilon_budget{entity}`` and ``ppsvm_entity_epsilon_remaining{entity}``: the budget and
      what is left (only with ``[privacy] epsilon_total``);
    - ``ppsvm_entity_baseline_releases_remaining{entity}``: entity-alone figures it may still release;
    - ``ppsvm_entity_releases_refused_rate_total{entity}`` and ``ppsvm_entity_releases_refused_disk_total{entity}``:
      releases refused since the process started because the caller was over ``[privacy] max_releases_per_minute``,
      or because the log could not take them (below ``min_free_disk_mb``, or after a failed append);
    - ``ppsvm_entity_release_log_write_failures_total{entity}``: appends the operating system refused (no space, a
      file-size limit, an I/O error) since the process started;
    - ``ppsvm_entity_failures_after_charge_total{entity}``: computations on the records that failed after their
      release was charged, since the process started (the caller got the fixed text).
    """

    def __init__(self, entity_id: str, column_block: int, guard: ReleaseGuard) -> None:
        self.entity_id = entity_id
        self.column_block = column_block
        self.guard = guard

    def collect(self) -> Iterator[Metric]:
        guard, entity = self.guard, self.entity_id
        info = GaugeMetricFamily(
            "ppsvm_entity_info", "The entity this process serves.", labels=["entity", "mode", "column_block"]
        )
        info.add_metric([entity, guard.mode, str(self.column_block)], 1)
        yield info
        releases = CounterMetricFamily(
            "ppsvm_entity_releases", "Releases recorded in the entity's release log, by RPC.", labels=["entity", "rpc"]
        )
        counts: dict[str, int] = {}
        for rpc, count in list(guard.releases_by_rpc.items()):
            name = rpc if rpc in ENTITY_RPCS else "other"  # only names from the fixed set
            counts[name] = counts.get(name, 0) + count
        for rpc, count in sorted(counts.items()):
            releases.add_metric([entity, rpc], count)
        yield releases
        spent = GaugeMetricFamily("ppsvm_entity_epsilon_spent", "DP privacy budget spent.", labels=["entity"])
        spent.add_metric([entity], epsilon_of(guard.spent_micro))
        yield spent
        if guard.total_micro is not None:
            budget = GaugeMetricFamily("ppsvm_entity_epsilon_budget", "DP privacy budget.", labels=["entity"])
            budget.add_metric([entity], epsilon_of(guard.total_micro))
            yield budget
            remaining = GaugeMetricFamily(
                "ppsvm_entity_epsilon_remaining", "DP privacy budget left.", labels=["entity"]
            )
            remaining.add_metric([entity], epsilon_of(guard.remaining_micro or 0))
            yield remaining
        baselines = GaugeMetricFamily(
            "ppsvm_entity_baseline_releases_remaining",
            "Entity-alone figures the entity may still release ([privacy] max_baseline_releases).",
            labels=["entity"],
        )
        baselines.add_metric([entity], max(0, guard.max_baseline_releases - guard.baselines))
        yield baselines
        for reason, count, text in (
            ("rate", guard.rate_refusals, "the caller was over [privacy] max_releases_per_minute"),
            ("disk", guard.log.disk_refusals, "its release log could not take them (the floor, a failed append)"),
        ):
            refused = CounterMetricFamily(
                f"ppsvm_entity_releases_refused_{reason}",
                f"Releases refused since the entity started: {text}.",
                labels=["entity"],
            )
            refused.add_metric([entity], count)
            yield refused
        failures = CounterMetricFamily(
            "ppsvm_entity_release_log_write_failures",
            "Appends to the release log the operating system refused since the entity started.",
            labels=["entity"],
        )
        failures.add_metric([entity], guard.log.write_failures)
        yield failures
        after_charge = CounterMetricFamily(
            "ppsvm_entity_failures_after_charge",
            "Computations on the records that failed after their release was charged (memory, disk) since the "
            "entity started: each is a bug to look at, since a failure that depends on the records answers a bit.",
            labels=["entity"],
        )
        after_charge.add_metric([entity], guard.failures_after_charge)
        yield after_charge
