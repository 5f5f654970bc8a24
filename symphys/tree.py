"""Trees of model values, flattened to a list of leaves and rebuilt.

A tree is a frozen dataclass, a tuple (`Vec3` and `Mat3` are NamedTuples),
None, or a leaf (anything else: a tensor, an array, a number), nested. A
loop takes its inputs as a flat list of tensors; `flatten` makes that list
and a `Node` describing the tree, `unflatten` gives the tree back, so a
parameter such as `WorldArrays.ground_friction` stays a named field on both
sides. Dataclass fields declared with `static()` are part of the `Node`
(fixed when the graph is built), not leaves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass


def static(default=dataclasses.MISSING):
    """A dataclass field that `flatten` keeps in the structure, not a leaf."""
    return dataclasses.field(default=default, metadata={"static": True})


@dataclass(frozen=True)
class Node:
    """The structure of a tree: its type (None for a leaf), its children's
    structures, the names of a dataclass's leaf fields and the values of
    its static fields."""

    kind: type | None
    children: tuple["Node", ...] = ()
    names: tuple[str, ...] = ()
    statics: tuple[tuple[str, object], ...] = ()

    @property
    def size(self) -> int:
        """The number of leaves."""
        return 1 if self.kind is None else sum(c.size for c in self.children)


LEAF = Node(None)
_NONE = Node(type(None))


def _is_static(f) -> bool:
    return bool(f.metadata.get("static"))


def flatten(tree) -> tuple[list, Node]:
    """(leaves in depth-first order, the tree's structure)."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(x, leaves: list) -> Node:
    if x is None:
        return _NONE
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        names = tuple(f.name for f in dataclasses.fields(x) if not _is_static(f))
        statics = tuple((f.name, getattr(x, f.name)) for f in dataclasses.fields(x)
                        if _is_static(f))
        return Node(type(x), tuple(_flatten(getattr(x, n), leaves) for n in names), names,
                    statics)
    if isinstance(x, tuple):
        return Node(type(x), tuple(_flatten(c, leaves) for c in x))
    leaves.append(x)
    return LEAF


def unflatten(node: Node, leaves) -> object:
    """The tree of structure `node` holding `leaves` (exactly node.size)."""
    leaves = list(leaves)
    if len(leaves) != node.size:
        raise ValueError(f"the structure holds {node.size} leaves, got {len(leaves)}")
    return _build(node, iter(leaves))


def _build(node: Node, leaves: Iterator):
    if node.kind is None:
        return next(leaves)
    if node.kind is type(None):
        return None
    children = [_build(c, leaves) for c in node.children]
    if dataclasses.is_dataclass(node.kind):
        return node.kind(**dict(zip(node.names, children)), **dict(node.statics))
    if hasattr(node.kind, "_fields"):              # a NamedTuple
        return node.kind(*children)
    return node.kind(children)


def tree_map(fn: Callable, tree, *rest):
    """The tree of `fn(leaf, *matching leaves of rest)`; every tree must
    have the same structure."""
    leaves, node = flatten(tree)
    others = [flatten(t) for t in rest]
    for _, other in others:
        if other != node:
            raise ValueError("tree_map: the trees differ in structure")
    return unflatten(node, [fn(*xs) for xs in zip(leaves, *(o for o, _ in others))])
