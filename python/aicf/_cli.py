"""The console entry points `aicfc` and `aicf-run` of a wheel built at the repository root: each
runs the tool the wheel ships in aicf/bin with the same arguments."""
import os
import sys


def _exec(tool: str) -> None:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", tool)
    if not os.path.exists(path):
        sys.exit(f"{tool}: not in this aicf package ({path}); install the wheel built at the "
                 f"repository root (pip install <aicf checkout>) for the tools")
    os.execv(path, [path] + sys.argv[1:])


def aicfc() -> None:
    _exec("aicfc")


def aicf_run() -> None:
    _exec("aicf-run")
