"""Modules that a module holds outside the module tree.

A module kept in a plain attribute (a list, tuple or dict of modules, or the
attribute itself set through object.__setattr__) is no submodule:
named_modules does not list it under its holder, yet the holder's forward may
call it. Install needs to know: a group whose forward runs another group's
module is unsharded while that one runs, as a parent is, so the two must not
share a ring slot (arena.ring_members_of)."""

from __future__ import annotations

from collections.abc import Iterator

from torch import nn

_TREE_ATTRS = ("_modules", "_parameters", "_buffers")


def _plain_modules(holder: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """(attribute path, module) for every module in `holder`'s plain attributes."""
    for name, value in vars(holder).items():
        if name in _TREE_ATTRS:
            continue
        if isinstance(value, nn.Module):
            yield name, value
        elif isinstance(value, (list, tuple)):
            yield from ((f"{name}[{i}]", v) for i, v in enumerate(value) if isinstance(v, nn.Module))
        elif isinstance(value, dict):
            yield from ((f"{name}[{k!r}]", v) for k, v in value.items() if isinstance(v, nn.Module))


def held_outside_tree(model: nn.Module) -> dict[int, list[tuple[str, nn.Module]]]:
    """For each module of `model` that holds any (by id): (path from the model,
    held module) for every module in its plain attributes, apart from its own
    ancestors and itself (a back-reference runs nothing that the holder is
    inside of)."""
    held: dict[int, list[tuple[str, nn.Module]]] = {}
    for path, holder in model.named_modules():
        for attr, target in _plain_modules(holder):
            if any(m is holder for m in target.modules()):
                continue  # the holder itself or one of its ancestors
            held.setdefault(id(holder), []).append((f"{path}.{attr}" if path else attr, target))
    return held


def held_by_group(modules: list[nn.Module], held: dict[int, list[tuple[str, nn.Module]]]) -> dict[int, str]:
    """Every module (by id, with the attribute path it is held through) that
    the subtrees of `modules` hold outside the tree, with the held modules'
    own submodules."""
    out: dict[int, str] = {}
    for top in modules:
        for sub in top.modules():
            for path, target in held.get(id(sub), ()):
                for m in target.modules():
                    out.setdefault(id(m), path)
    return out


def held_through(held_by: dict[int, str], modules: list[nn.Module]) -> str | None:
    """The attribute path through which a group's `held_by` (held_by_group's
    answer) holds any of `modules`, or None when it holds none of them."""
    return next((held_by[id(m)] for m in modules if id(m) in held_by), None)
