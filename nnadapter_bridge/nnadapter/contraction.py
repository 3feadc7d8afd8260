"""Paddle Lite's subgraph contraction: grouping the nodes of a DAG into clusters with no cycle between them.

Both splits use it: partition.detector groups the supported Paddle ops of a program into device subgraphs,
and nnadapter.device_split groups the operations of one NNAdapter Model by device.

The nodes are visited in topological order; each node that may be merged is contracted with every
out-neighbour of its group, union-find style, unless a reverse DFS from the neighbour's other
in-neighbours reaches the node (another path between them runs outside, so merging would close a cycle),
and this repeats until nothing more merges. The result is acyclic between clusters, and every path
between two nodes of one cluster stays inside it.

The adjacency is kept in plain dicts rather than a networkx graph: every merge rewires the edges of the
merged node, which networkx's contracted_nodes would do by copying the graph each time.

Entry point: `contract`. Imports nothing of the project, and not networkx.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TypeVar

Node = TypeVar("Node", bound=Hashable)


def _reaches_backwards(starts: Iterable, target, pred: Mapping) -> bool:
    """Whether `target` is an ancestor of (or one of) `starts`, following in-links."""
    seen = set()
    stack = list(starts)
    while stack:
        node = stack.pop()
        if node == target:
            return True
        if node in seen:
            continue
        seen.add(node)
        stack.extend(pred[node])
    return False


def contract(order: Iterable[Node], successors: Mapping[Node, Iterable[Node]],
             group_of: Callable[[Node], Hashable | None]) -> dict[Node, Node]:
    """Cluster the nodes of a DAG: node -> its cluster's root (a member that names the cluster; not
    necessarily its first node in `order`).

    `order` lists every node in topological order; `successors[node]` its out-neighbours. Two nodes
    may share a cluster only when `group_of` gives both the same value; a node whose group is None stays
    alone. The clusters do not depend on the order of the successor lists.
    """
    order = list(order)
    succ = {n: dict.fromkeys(successors[n]) for n in order}
    pred: dict = {n: {} for n in order}
    for n in order:
        for m in succ[n]:
            pred[m][n] = None
    parent = {n: n for n in order}

    def find(node):
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for src in order:
        group = group_of(src)
        if group is None:
            continue
        while True:
            to_merge = []
            for dst in succ[src]:
                if group_of(dst) != group:
                    continue
                others = [n for n in pred[dst] if n != src]
                if not _reaches_backwards(others, src, pred):
                    to_merge.append(dst)
            if not to_merge:
                break
            for dst in to_merge:
                parent[find(dst)] = find(src)
                del succ[src][dst]
                del pred[dst][src]
                for n in pred[dst]:
                    pred[src][n] = None
                    del succ[n][dst]
                    succ[n][src] = None
                for n in succ[dst]:
                    succ[src][n] = None
                    del pred[n][dst]
                    pred[n][src] = None
                pred[dst].clear()
                succ[dst].clear()
    return {n: find(n) for n in order}
