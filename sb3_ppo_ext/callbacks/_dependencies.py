"""Optional dependencies of the callbacks (video, plots, export), imported on use with an install hint."""

from __future__ import annotations

import importlib
from typing import Any

#: Optional dependencies and the ``pip install`` extra that provides them.
OPTIONAL_DEPENDENCIES = {
    "imageio": "sb3-ppo-ext[video]",
    "imageio_ffmpeg": "sb3-ppo-ext[video]",
    "matplotlib": "sb3-ppo-ext[video]",
    "PIL": "sb3-ppo-ext[video]",
    "onnx": "sb3-ppo-ext[export]",
    "onnxruntime": "sb3-ppo-ext[export]",
}


def require_module(module: str, purpose: str) -> Any:
    """Import an optional dependency, or raise ``ImportError`` saying what needs it and how to install it.

    :param module: importable module name, e.g. ``"imageio"``.
    :param purpose: what the caller needs it for, used in the message.
    :return: the imported module.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        extra = OPTIONAL_DEPENDENCIES.get(module, module)
        raise ImportError(f"{purpose} needs the optional dependency {module!r}: pip install '{extra}'") from error
