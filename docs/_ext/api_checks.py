"""Sphinx extension: the API reference's completeness checks, each a warning (an error under ``sphinx-build -W``).

- A public module, class, exception, function, method or property of the package that autodoc documents without a
  docstring. The API pages use autodoc with ``undoc-members``, so such an object is still listed and gets caught
  here. Data and attributes are exempt: a dataclass field or a constant is described by its class's ``:param:`` list
  or a ``#:`` comment, or by its name and value.
- A public module of the package (no component starting with ``_``) that no page documents, so that a new module
  cannot go unnoticed.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: The package whose objects are checked (the prefix of their ``__module__``).
PACKAGE = "sb3_ppo_ext"
#: Its packages whose modules must each be documented (``sb3_ppo_ext.envs`` installs from ``envs/``, outside
#: ``sb3_ppo_ext/``, so it is walked on its own).
WALKED_PACKAGES = ("sb3_ppo_ext", "sb3_ppo_ext.envs")

#: autodoc object types that must carry a docstring.
NEEDS_DOCSTRING = frozenset({"module", "class", "exception", "function", "method", "property", "decorator"})


def warn_missing_docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """``autodoc-process-docstring`` handler: warn when ``lines`` (the docstring autodoc found) is empty.

    :param app: the Sphinx application.
    :param what: the autodoc object type (``"class"``, ``"method"``...).
    :param name: the object's full name.
    :param obj: the object.
    :param options: the directive's options.
    :param lines: the docstring's lines (empty for a missing docstring).
    """
    if what not in NEEDS_DOCSTRING or any(line.strip() for line in lines):
        return
    if name.rpartition(".")[2].startswith("_"):
        return  # a private or special member that a page asked for explicitly
    module = name if what == "module" else getattr(obj, "__module__", None) or ""
    if what not in ("method", "property") and not module.startswith(PACKAGE):
        return  # imported from elsewhere: autodoc reports it to this event before leaving it out of the page
    logger.warning("%s %s has no docstring", what, name, type="autodoc", subtype="docstring")


def public_modules() -> list[str]:
    """Every module of :data:`WALKED_PACKAGES` without a private component (``_bullet``, ``__main__``)."""
    names = set(WALKED_PACKAGES)
    for package_name in WALKED_PACKAGES:
        package = importlib.import_module(package_name)
        names.update(info.name for info in pkgutil.walk_packages(package.__path__, f"{package_name}."))
    return sorted(name for name in names if not any(part.startswith("_") for part in name.split(".")))


def warn_undocumented_modules(app: Sphinx, env: BuildEnvironment) -> None:
    """``env-check-consistency`` handler: warn about each public module that no ``automodule`` documents."""
    documented = set(env.get_domain("py").modules)  # type: ignore[attr-defined]
    for name in public_modules():
        if name not in documented:
            logger.warning(
                "module %s is not documented by any page of docs/api/ (add an automodule)",
                name,
                type="autodoc",
                subtype="module",
            )


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the checks with Sphinx."""
    app.connect("autodoc-process-docstring", warn_missing_docstring)
    app.connect("env-check-consistency", warn_undocumented_modules)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
