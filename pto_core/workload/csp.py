"""CSP pipelines (seed 002): bounded channels between processes.

A channel carries workloads: ``send(ch, w)`` enumerates ``w`` and passes its tasks on;
``consume(ch, body)`` runs ``body(k)`` for every item ``k = 0, 1, ...`` received, and the tasks
``body`` creates depend on the tasks of the item (ChannelDep). A channel of depth ``d`` holds at
most ``d`` items that are not yet consumed: a producer that finds it full stalls, and its later
tasks wait (in the task graph) for the consumer's tasks of the item that freed the slot. An
event is a channel of depth 0: ``send`` hands the item straight to a waiting receiver.

    load, comp = Channel("loaded", 2), Channel("computed", 2)
    p = pipeline(
        process("load").produces(load).body(
            for_each(Dense(n), lambda i: send(load, task("ld", [x.read(i * 8, 0, 8, 64), ...])))),
        process("compute").consumes(load).produces(comp).body(
            consume(load, lambda k: send(comp, task("mul", [...])))),
        process("store").consumes(comp).body(consume(comp, lambda k: task("st", [...]))))

Enumeration runs the processes as coroutines, switching when one blocks; when none can move and
some are unfinished, it raises :class:`PTODeadlockError` naming each stalled process and the
channel it waits on - it never hangs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..errors import PTOError
from .expr import Var
from .ir import DepKind, Node, _as_node, _body, _check_name, _fresh_var, _register, _unregister, _ST

__all__ = ["Channel", "Event", "Process", "process", "send", "consume", "pipeline", "Pipeline",
           "Send", "Consume", "PTODeadlockError"]


class PTODeadlockError(PTOError):
    """A pipeline that can never make progress; ``.channels`` names the channels involved."""

    def __init__(self, message: str, channels: tuple[str, ...]) -> None:
        self.channels = channels
        super().__init__(message)


@dataclass(frozen=True)
class Channel:
    """A bounded channel of ``depth`` items (0: an event, a rendezvous)."""
    name: str
    depth: int = 1

    def __post_init__(self) -> None:
        _check_name(self.name, "channel")
        if not isinstance(self.depth, int) or isinstance(self.depth, bool) or self.depth < 0:
            raise PTOError(f"Channel '{self.name}': depth is an int >= 0, got {self.depth!r}")


def Event(name: str) -> Channel:
    """An event: a channel of depth 0 (``send`` records it, ``consume`` waits for it)."""
    return Channel(name, 0)


@dataclass(frozen=True)
class Send(Node):
    channel: Channel
    body: Node

    @property
    def dep(self) -> DepKind:
        return DepKind.CHANNEL


@dataclass(frozen=True)
class Consume(Node):
    channel: Channel
    var: str
    body: Node

    @property
    def dep(self) -> DepKind:
        return DepKind.CHANNEL


def send(ch: Channel, w: Node) -> Node:
    """Enumerate ``w`` and put its tasks on ``ch`` as one item (stalls while ``ch`` is full)."""
    if not isinstance(ch, Channel):
        raise PTOError(f"send: expects a Channel, got {type(ch).__name__}")
    node = _as_node(w, f"send on '{ch.name}'")
    return _register(Send(ch, node), [node])


def consume(ch: Channel, body: Callable[[Var], Any]) -> Node:
    """``body(k)`` for each item ``k`` received on ``ch``, until every producer finished."""
    if not isinstance(ch, Channel):
        raise PTOError(f"consume: expects a Channel, got {type(ch).__name__}")
    k = _fresh_var()
    try:
        b = _body(body, (k,), f"consume of '{ch.name}'")
    finally:
        _ST.depth -= 1
    return _register(Consume(ch, k.name, b), [b])


@dataclass(frozen=True)
class Process:
    name: str
    consumes_: tuple = ()
    produces_: tuple = ()
    body_: Optional[Node] = None

    def consumes(self, *chs: Channel) -> "Process":
        return Process(self.name, self.consumes_ + self._channels(chs, "consumes"),
                       self.produces_, self.body_)

    def produces(self, *chs: Channel) -> "Process":
        return Process(self.name, self.consumes_,
                       self.produces_ + self._channels(chs, "produces"), self.body_)

    def _channels(self, chs: tuple, verb: str) -> tuple:
        for c in chs:
            if not isinstance(c, Channel):
                raise PTOError(f"process '{self.name}'.{verb}: expects Channels, got "
                               f"{type(c).__name__} {c!r:.40}")
        return chs

    def body(self, w: Node) -> "Process":
        node = _as_node(w, f"process '{self.name}'")
        _unregister(node)                  # the body belongs to the process, not the scope
        return Process(self.name, self.consumes_, self.produces_, node)


def process(name: str) -> Process:
    return Process(_check_name(name, "process"))


@dataclass(frozen=True)
class Pipeline(Node):
    processes: tuple

    @property
    def dep(self) -> DepKind:
        return DepKind.CHANNEL


def pipeline(*procs: Process) -> Pipeline:
    """Processes that run together, connected by their channels (ChannelDep)."""
    names = set()
    for p in procs:
        if not isinstance(p, Process):
            raise PTOError(f"pipeline: expects processes, got {type(p).__name__}")
        if p.body_ is None:
            raise PTOError(f"process '{p.name}' has no body (.body(workload))")
        if p.name in names:
            raise PTOError(f"pipeline: two processes are named '{p.name}'")
        names.add(p.name)
    chans: dict[str, Channel] = {}
    for p in procs:
        for c in p.consumes_ + p.produces_:
            if chans.setdefault(c.name, c) != c:
                raise PTOError(f"pipeline: two different channels are named '{c.name}'")
    return _register(Pipeline(tuple(procs)))
