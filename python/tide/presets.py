"""Parameter groups of well-known models, one FSDP2 group (one layer) each.

The data lives in tide/presets/<name>.json: {"name", "description",
"params": [{"name", "shape", "dtype"}]}, with shapes as the model's
state dict stores them.
"""

from __future__ import annotations

import json
from importlib import resources


def _preset_files() -> dict:
    folder = resources.files("tide") / "presets"
    return {
        entry.name[: -len(".json")]: entry
        for entry in folder.iterdir()
        if entry.name.endswith(".json")
    }


def names() -> list[str]:
    """Preset names, sorted."""
    return sorted(_preset_files())


def load(name: str) -> dict:
    """The preset `name` as {"name", "description", "params"}; KeyError if unknown."""
    files = _preset_files()
    if name not in files:
        raise KeyError(f"unknown preset {name!r} (available: {', '.join(sorted(files))})")
    return json.loads(files[name].read_text(encoding="utf-8"))


def params(name: str) -> list[dict]:
    """The preset's parameters: [{"name", "shape", "dtype"}]."""
    return load(name)["params"]
