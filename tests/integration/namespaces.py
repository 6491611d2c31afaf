"""A small network of Linux network namespaces: one per party, each with its own IPv4 address, on one switch.

Wiring: a namespace ``<prefix>-switch`` holds a Linux bridge ``br0``; every party gets a namespace
``<prefix>-<party>`` and a veth pair whose inside end is the party's ``eth0`` (its only interface besides
``lo``) and whose outside end ``port<k>`` is a port of that bridge. The bridge lives in a namespace of its own,
not in the root namespace, so the host's routes, firewall (a Docker FORWARD DROP policy, br_netfilter) and
interfaces are never touched and the party addresses cannot collide with anything the host routes: nothing
of this network is visible outside its namespaces.

Names carry the pid of the process that made them (``ppsvm-mh<pid>-...``), so parallel runs do not clash
and the leftovers of a killed run are recognised and removed by the next one (:func:`remove_stale`).
Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Sequence

PREFIX = "ppsvm-mh"
_OWNED = re.compile(rf"^{PREFIX}(\d+)-")
SWITCH = "switch"
BRIDGE = "br0"
IP_TIMEOUT_S = 30.0


class NamespaceError(RuntimeError):
    """An ``ip`` or ``tc`` command failed; the message holds the command and its stderr."""


def run(*command: str) -> str:
    """Run one iproute2 command; its stdout, or NamespaceError with its stderr."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if result.returncode != 0:
        raise NamespaceError(f"{' '.join(command)} exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def ip(namespace: str, *args: str) -> str:
    """``ip -n NAMESPACE ARGS...``."""
    return run("ip", "-n", namespace, *args)


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None: not root, or no ``ip``."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces (run as root, as CI does)"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip` to create network namespaces (Debian: apt-get install iproute2)"
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> list[str]:
    # `ip netns list` prints "NAME" or "NAME (id: N)".
    return [line.split()[0] for line in run("ip", "netns", "list").splitlines() if line.strip()]


def delete_namespace(name: str) -> None:
    """Kill whatever still runs in ``name`` (by pid), then delete it: its interfaces go with it."""
    pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    for pid in pids.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=IP_TIMEOUT_S)


def remove_stale() -> list[str]:
    """Delete the namespaces of earlier runs whose process is gone (a killed test); the names removed."""
    removed = []
    for name in _namespaces():
        owner = _OWNED.match(name)
        if owner and int(owner.group(1)) != os.getpid() and not _pid_alive(int(owner.group(1))):
            delete_namespace(name)
            removed.append(name)
    return removed


def _subnet() -> ipaddress.IPv4Network:
    """10.213.x.0/24, x from the pid for readable logs: two runs that meet on one x are still apart, each on a
    bridge of its own, and the host never routes any of it."""
    return ipaddress.IPv4Network(f"10.213.{os.getpid() % 256}.0/24")


class Network:
    """The switch and one namespace per party; :meth:`close` removes all of it (also after a failed start)."""

    def __init__(self, parties: Sequence[str]) -> None:
        self.prefix = f"{PREFIX}{os.getpid()}"
        self.subnet = _subnet()
        hosts = list(self.subnet.hosts())
        self.parties = list(parties)
        # .10, .11, ...: the party's address on the shared /24.
        self.addresses = {party: str(hosts[9 + k]) for k, party in enumerate(self.parties)}
        self.ports = {party: f"port{k}" for k, party in enumerate(self.parties)}
        self.made: list[str] = []

    def namespace(self, party: str) -> str:
        return f"{self.prefix}-{party}"

    @property
    def switch(self) -> str:
        return f"{self.prefix}-{SWITCH}"

    def create(self) -> Network:
        try:
            self._add(self.switch)
            ip(self.switch, "link", "add", BRIDGE, "type", "bridge")
            ip(self.switch, "link", "set", BRIDGE, "up")
            for party in self.parties:
                inside, port = self.namespace(party), self.ports[party]
                self._add(inside)
                # The inside end is made in the party's namespace directly: it never appears on the switch.
                ip(self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", inside)
                ip(self.switch, "link", "set", port, "master", BRIDGE, "up")
                ip(inside, "addr", "add", f"{self.addresses[party]}/{self.subnet.prefixlen}", "dev", "eth0")
                ip(inside, "link", "set", "eth0", "up")
                ip(inside, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def _add(self, name: str) -> None:
        run("ip", "netns", "add", name)
        self.made.append(name)

    def exec_prefix(self, party: str) -> list[str]:
        """The argv prefix that runs a command inside ``party``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(party)]

    def cut(self, party: str) -> None:
        """Pull ``party``'s cable at the switch: its bridge port goes down, and with it the party's carrier."""
        ip(self.switch, "link", "set", self.ports[party], "down")

    def reconnect(self, party: str) -> None:
        ip(self.switch, "link", "set", self.ports[party], "up")

    def throttle(self, party: str, rate: str) -> None:
        """Limit what ``party`` sends to ``rate`` (a token bucket on its eth0; queued, not dropped)."""
        bucket = ("tbf", "rate", rate, "burst", "1600", "latency", "30s")
        run("tc", "-n", self.namespace(party), "qdisc", "replace", "dev", "eth0", "root", *bucket)

    def unthrottle(self, party: str) -> None:
        command = ["tc", "-n", self.namespace(party), "qdisc", "del", "dev", "eth0", "root"]
        subprocess.run(command, capture_output=True, timeout=IP_TIMEOUT_S)

    def close(self) -> None:
        """Delete every namespace made (party namespaces first: their veth ends take the switch ports along)."""
        for name in reversed(self.made):
            delete_namespace(name)
        self.made.clear()
