"""Runs the installed `tide` command in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path


def tide_script() -> Path | None:
    """The installed `tide` console script, if any."""
    candidate = Path(sysconfig.get_path("scripts")) / "tide"
    if candidate.is_file():
        return candidate
    found = shutil.which("tide")
    return Path(found) if found else None


def tide_command() -> list[str]:
    # Fall back to `python -m tide` so the other CLI tests still say something
    # when only the script is missing; test_console_script_installed catches that.
    script = tide_script()
    return [str(script)] if script else [sys.executable, "-m", "tide"]


class Completed:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def json(self) -> dict:
        return json.loads(self.stdout)

    def stderr_lines(self) -> list[str]:
        return self.stderr.splitlines()


def run_tide(*args: str) -> Completed:
    proc = subprocess.run(
        tide_command() + [str(a) for a in args],
        capture_output=True, text=True, timeout=120, check=False,
    )
    return Completed(proc)
