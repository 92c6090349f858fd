"""plain_references: which modules a module holds outside the module tree (install keeps such
holders out of the ring, fsdp_scenarios_schedule.module_called_through_a_plain_attribute)."""

from __future__ import annotations

from torch import nn

from tide.fsdp import plain_references


def _model():
    root = nn.Module()
    root.a = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    root.b = nn.Sequential(nn.Linear(2, 2))
    root.c = nn.Linear(2, 2)
    return root


def test_lists_tuples_dicts_and_direct_attributes_are_found():
    root = _model()
    inner = root.a[1]
    inner.helpers = [root.b]                          # list
    object.__setattr__(inner, "direct", root.c)       # an attribute nn.Module did not register
    root.b.pair = (root.c, "not a module")            # tuple, with a non-module
    root.c.table = {"k": root.a[0]}                   # dict
    held = plain_references.held_outside_tree(root)
    assert {(p, id(m)) for p, m in held[id(inner)]} == {("a.1.helpers[0]", id(root.b)), ("a.1.direct", id(root.c))}
    assert [(p, id(m)) for p, m in held[id(root.b)]] == [("b.pair[0]", id(root.c))]
    assert [(p, id(m)) for p, m in held[id(root.c)]] == [("c.table['k']", id(root.a[0]))]
    assert id(root) not in held and id(root.a) not in held  # registered submodules are the tree, not references


def test_back_references_to_ancestors_and_self_are_not_holds():
    root = _model()
    root.a[0].up = [root, root.a]  # its root and its parent
    root.a[0].me = [root.a[0]]
    assert plain_references.held_outside_tree(root) == {}


def test_a_group_holds_what_any_module_of_its_subtrees_holds_with_their_submodules():
    root = _model()
    root.a[1].helpers = [root.b]
    held = plain_references.held_outside_tree(root)
    by_a = plain_references.held_by_group([root.a], held)
    assert set(by_a) == {id(root.b), id(root.b[0])}
    assert set(by_a.values()) == {"a.1.helpers[0]"}
    assert plain_references.held_by_group([root.c], held) == {}
