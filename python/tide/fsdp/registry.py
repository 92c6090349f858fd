"""Which models have TIDE installed, and why install refused the others: the
state that install, uninstall and report share."""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any

import torch

from tide.fsdp import groups
from tide.fsdp.state import CommContext, TideGroup

refused: weakref.WeakKeyDictionary[torch.nn.Module, dict] = weakref.WeakKeyDictionary()


class Installations:
    """Model -> its Installation. The Installation refers back to the model
    (its root group's modules, the setters it wrapped), so it lives in the
    model's own __dict__: a registry holding it would keep every installed
    model, and its arena, alive after the user dropped it. Only a weak set of
    the models is kept here."""

    ATTR = "_tide_installation"

    def __init__(self):
        self._models: weakref.WeakSet = weakref.WeakSet()

    def get(self, model, default=None):
        inst = getattr(model, "__dict__", {}).get(self.ATTR)
        return inst if inst is not None else default

    def __getitem__(self, model):
        inst = self.get(model)
        if inst is None:
            raise KeyError(model)
        return inst

    def __contains__(self, model) -> bool:
        return self.get(model) is not None

    def __setitem__(self, model, inst) -> None:
        model.__dict__[self.ATTR] = inst
        self._models.add(model)

    def pop(self, model, default=None):
        self._models.discard(model)
        inst = getattr(model, "__dict__", {}).pop(self.ATTR, None)
        return inst if inst is not None else default

    def __delitem__(self, model) -> None:
        if self.pop(model) is None:
            raise KeyError(model)

    def keys(self) -> list:
        return [m for m in list(self._models) if m in self]


installed = Installations()


ABSENT = object()  # WrappedMethod.previous when the instance had no attribute of that name


@dataclasses.dataclass(frozen=True)
class WrappedMethod:
    """A method install set on a module instance (_LAYOUT_SETTERS, zero_grad), with what
    the instance held before: uninstall gives that back."""
    module: torch.nn.Module
    name: str
    wrapper: Any
    previous: Any


class Installation:
    def __init__(self, mode: str, ring: bool):
        self.mode = mode
        self.ring = ring
        self.inversion: str = "off"  # backward prefetch inversion: "on" or "off (why)"
        self.check_read_done = False
        self.release_grads = "read-done-polled"
        self.infos: list[groups.GroupInfo] = []
        self.contexts: list[CommContext] = []
        self.tide_groups: list[TideGroup] = []
        self.options: dict[str, Any] = {}         # install()'s arguments, to lay out again
        self.watched: list[WrappedMethod] = []  # methods wrapped (_LAYOUT_SETTERS, zero_grad)
        self.dropped: weakref.finalize | None = None  # runs if the model is collected while installed

    def __reduce_ex__(self, protocol):
        raise TypeError("a model with TIDE installed cannot be pickled or deep-copied (its arena and "
                        "communicator are this process's): tide.fsdp.uninstall(model) first; state dicts "
                        "work while installed")
