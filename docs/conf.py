"""Sphinx configuration of the sb3_ppo_ext documentation (Read the Docs theme, autodoc, Markdown guides via MyST).

Build, offline, from the repository root:

    pip install -e ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html

Our own extensions live in ``docs/_ext/``: ``api_checks`` makes a public object that autodoc documents without a
docstring, and a public module that no page documents, a warning (so an error under ``-W``); ``cli_help`` is the
``cli-help`` directive that puts the ``--help`` of every ``sb3-ppo-ext`` command into the command-line page, run at
build time. With ``nitpicky``, a reference to one of our objects that does not resolve is a warning too.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import sb3_ppo_ext  # the installed package: pip install -e ".[docs]"

DOCS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(DOCS, "_ext"))  # our extensions, named in `extensions` below

project = "sb3_ppo_ext"
author = "sb3_ppo_ext contributors"
copyright = "sb3_ppo_ext contributors"
version = release = sb3_ppo_ext.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "myst_parser",
    "sphinx_rtd_theme",
    "api_checks",
    "cli_help",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]

# Markdown guides: `#section-title` links (docs/guide/zoo.md#pickles-...) resolve to their headings.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]
# The results pages skip heading levels in places (H2 to H4); that is their authors' layout, not an error.
suppress_warnings = ["myst.header"]

# autodoc: members in source order, the class docstring only (reST `:param:` lists, as SB3's), signatures with
# their type hints.
autodoc_member_order = "bysource"
autoclass_content = "class"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
# One parameter per line in long signatures (PPO's, for one).
python_maximum_signature_line_length = 110
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
# RayVecEnv's module imports Ray (the `ray` extra); without it, the page is built from a stand-in module.
autodoc_mock_imports = [] if importlib.util.find_spec("ray") else ["ray"]

# A reference to one of our own objects that does not resolve is a warning (an error under -W); references to other
# packages' objects (torch, numpy, gymnasium, SB3, Ray...) are not checked: the build is offline, with no inventories.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(?!sb3_ppo_ext\b).*"),
    (r"py:.*", r".*\._\w+"),  # private classes in type hints (a loader's return type...)
    (r"py:class", r".*\.Self[A-Z]\w*"),  # SB3-style TypeVars of ``learn``'s return type
    (r"py:(class|obj)", r"sb3_ppo_ext\.ppo\.compiled\.F"),  # the type variable of ``CompiledOrEager``'s function
]

html_theme = "sphinx_rtd_theme"
html_title = f"sb3_ppo_ext {release}"
html_theme_options = {"navigation_depth": 3, "collapse_navigation": False}
html_static_path: list[str] = []
