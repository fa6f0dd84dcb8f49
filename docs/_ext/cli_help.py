"""Sphinx extension: the ``cli-help`` directive, the ``--help`` text of an ``sb3-ppo-ext`` command, run at build time.

``sb3-ppo-ext``'s zoo-backed commands build their parsers inside rl-zoo3's scripts (amended while they run), so there
is no parser-building function for sphinx-argparse to call; the help text is taken from the command itself.
``.. cli-help:: train`` in reST (or a ```` ```{cli-help} train ```` fence in MyST Markdown)
runs ``sb3-ppo-ext train --help`` (no argument: ``sb3-ppo-ext --help``) and shows its output as a literal block.
Every command runs in one helper process, started on first use (importing rl-zoo3 once), with ``COLUMNS=88`` (the
width of the theme's code blocks) so that the text does not depend on the terminal; nothing is downloaded and no file
is written. A command that does not exit with status 0 is a warning (an error under ``sphinx-build -W``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

#: Width of the help text (argparse reads ``COLUMNS``).
HELP_COLUMNS = 88

#: The helper: reads one JSON argument list per line, runs ``sb3_ppo_ext.cli.main(argv + ["--help"])`` and answers
#: one JSON line ``[exit status, stdout, stderr]``.
_HELPER = r"""
import contextlib, io, json, sys
from sb3_ppo_ext.cli import main
for line in sys.stdin:
    out, err, status = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([*json.loads(line), "--help"])
        except SystemExit as end:
            status = end.code if isinstance(end.code, int) else (0 if end.code is None else 1)
        except Exception as error:
            status, err = 1, io.StringIO(f"{type(error).__name__}: {error}")
    sys.stdout.write(json.dumps([status, out.getvalue(), err.getvalue()]) + "\n")
    sys.stdout.flush()
"""


class HelpRunner:
    """The helper process, started on first use and reused by every ``cli-help`` directive of a build."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.cache: dict[tuple[str, ...], tuple[int, str, str]] = {}

    def help(self, argv: tuple[str, ...]) -> tuple[int, str, str]:
        """``(exit status, stdout, stderr)`` of ``sb3-ppo-ext *argv --help``."""
        if argv not in self.cache:
            if self.process is None:
                env = dict(os.environ, COLUMNS=str(HELP_COLUMNS), PYTHONWARNINGS="ignore")
                self.process = subprocess.Popen(
                    [sys.executable, "-c", _HELPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
                )
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(json.dumps(list(argv)) + "\n")
            self.process.stdin.flush()
            answer = self.process.stdout.readline()
            if not answer:
                return 1, "", "the helper process ended (see the build's stderr)"
            status, out, err = json.loads(answer)
            self.cache[argv] = (status, out, err)
        return self.cache[argv]

    def close(self, *_: Any) -> None:
        """End the helper process (``build-finished``)."""
        if self.process is not None:
            self.process.communicate()
            self.process = None


_RUNNER = HelpRunner()


class CliHelpDirective(SphinxDirective):
    """``cli-help [COMMAND [OPTION...]]``: the output of ``sb3-ppo-ext COMMAND OPTION... --help``."""

    optional_arguments = 10
    has_content = False

    def run(self) -> list[nodes.Node]:
        """Run the command and return its help text as a literal block."""
        argv = tuple(self.arguments)
        status, out, err = _RUNNER.help(argv)
        command = " ".join(["sb3-ppo-ext", *argv, "--help"])
        if status != 0 or not out.strip():
            logger.warning(
                "`%s` failed (exit status %s): %s", command, status, err.strip()[-2000:], location=self.get_location()
            )
        block = nodes.literal_block(out, out.rstrip() + "\n", language="text")
        block["classes"].append("cli-help")
        return [block]


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directive and the helper's clean-up."""
    app.add_directive("cli-help", CliHelpDirective)
    app.connect("build-finished", _RUNNER.close)
    return {"version": "1", "parallel_read_safe": False, "parallel_write_safe": True}
