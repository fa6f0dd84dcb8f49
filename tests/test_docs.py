"""The documentation: the Sphinx site builds without a warning, and every Python example in it runs.

**The build** (:func:`test_sphinx_build`): ``python -m sphinx -W --keep-going`` on ``docs/``, as the README's build
command, into a temporary folder, with the ``dummy`` builder (every page is read and every reference resolved, as
for HTML, but nothing is written: about half the time). Warnings are errors, so a broken reference, a public object
without a docstring, an undocumented module (``docs/_ext/api_checks.py``) or a failing ``sb3-ppo-ext COMMAND --help``
(``docs/_ext/cli_help.py``) fails it.

**The examples** (:func:`test_example`): every fenced ``python`` block of ``README.md`` and of the Markdown pages in
``docs/`` (``guide/``, ``results/``) runs as a script, ``python example.py`` in a fresh interpreter and an empty
temporary folder (files it writes go there), with one torch thread. An HTML comment on the line right before the
opening fence (blank lines between are allowed; it shows neither on GitHub nor in the built site) changes how it runs,
one clause or several separated by ``;``:

- ``<!-- not run: REASON -->``: the block is not run; the test is skipped with ``REASON`` (say what it needs: a
  display, a Ray cluster, a trained run...).
- ``<!-- test: replace OLD -> NEW -->``: run the block with the text ``OLD`` replaced by ``NEW`` (every occurrence),
  to cut a training budget to a few seconds (``replace 100_000 -> 2_048``). ``OLD`` must occur in the block, so the
  clause cannot go stale unnoticed.
- ``<!-- test: setup CODE -->``: run the line of Python ``CODE`` (no ``;`` in it; one clause per line) right before
  the block, to stand for what a fragment takes from its context (``setup raw_obs = env.get_original_obs()``).
- ``<!-- test: continues -->``: the block continues the page's previous Python block, in the same script, so it can
  use its names and files. A page's blocks chained so run as one test, named after all of them
  (``docs/guide/callbacks.md:34+127``).

An example passes when its script exits with status 0 within :data:`EXAMPLE_TIMEOUT` seconds.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: Pages whose Python blocks are run: the README and every Markdown page of the site (``docs/guide/``,
#: ``docs/results/`` and any other folder of ``docs/`` but the build output).
EXAMPLE_PAGES = (ROOT / "README.md", *sorted(page for page in DOCS.rglob("*.md") if "_build" not in page.parts))
#: Seconds after which an example (with the blocks it continues) counts as hung. Each takes a few seconds (3-13 s on
#: a 2-core machine with two training runs beside it); the margin is for a machine busier still.
EXAMPLE_TIMEOUT = 600
#: Seconds after which the Sphinx build counts as hung (it takes about 25 s on the same machine).
BUILD_TIMEOUT = 900

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
_COMMENT = re.compile(r"^\s*<!--\s*(?P<body>.*?)\s*-->\s*$")


@dataclasses.dataclass
class Example:
    """One fenced ``python`` block of a page, with the clauses of the comment before it."""

    page: Path
    line: int  # of the opening fence, 1-based
    code: str
    skip_reason: str | None = None
    replacements: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    setup: list[str] = dataclasses.field(default_factory=list)
    continues: bool = False

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def script(self) -> str:
        """The block's code with its replacements made.

        :raises ValueError: for a replacement whose text is not in the block.
        """
        code = self.code
        for old, new in self.replacements:
            if old not in code:
                raise ValueError(f"{self.name}: 'replace {old} -> {new}': {old!r} is not in the block")
            code = code.replace(old, new)
        return "".join(f"{line}  # setup\n" for line in self.setup) + code


def parse_clauses(example: Example, comment: str) -> None:
    """Apply the clauses of the comment ``comment`` (its text between ``<!--`` and ``-->``) to ``example``.

    :raises ValueError: for a comment that is not one of the forms in the module docstring.
    """
    if comment.startswith("not run:"):
        example.skip_reason = comment.removeprefix("not run:").strip()
        if not example.skip_reason:
            raise ValueError(f"{example.name}: 'not run:' needs a reason")
        return
    if not comment.startswith("test:"):
        return  # another comment: not ours
    for clause in filter(None, (part.strip() for part in comment.removeprefix("test:").split(";"))):
        if clause == "continues":
            example.continues = True
        elif clause.startswith("replace ") and " -> " in clause:
            old, _, new = clause.removeprefix("replace ").partition(" -> ")
            example.replacements.append((old.strip(), new.strip()))
        elif clause.startswith("setup "):
            example.setup.append(clause.removeprefix("setup ").strip())
        else:
            raise ValueError(
                f"{example.name}: unknown clause {clause!r} (use 'replace OLD -> NEW', 'setup CODE' or 'continues')"
            )


def page_examples(page: Path) -> list[Example]:
    """The fenced ``python`` blocks of ``page``, in order, with their clauses."""
    lines = page.read_text(encoding="utf-8").splitlines()
    examples: list[Example] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        indent, fence, info = match["indent"], match["fence"], match["info"].strip()
        end = index + 1
        while end < len(lines) and not re.match(rf"^{re.escape(indent)}{fence[0]}{{{len(fence)},}}\s*$", lines[end]):
            end += 1
        if info.split(maxsplit=1)[:1] == ["python"]:
            body = "\n".join(line.removeprefix(indent) for line in lines[index + 1 : end])
            example = Example(page, index + 1, textwrap.dedent(body) + "\n")
            before = index - 1
            while before >= 0 and not lines[before].strip():
                before -= 1
            comment = _COMMENT.match(lines[before]) if before >= 0 else None
            if comment:
                parse_clauses(example, comment["body"])
            examples.append(example)
        index = end + 1
    return examples


def all_examples() -> list[Example]:
    return [example for page in EXAMPLE_PAGES for example in page_examples(page)]


def chains(examples: list[Example]) -> list[list[Example]]:
    """The examples grouped into runs: each block with the blocks that continue it (``continues``)."""
    runs: list[list[Example]] = []
    for example in examples:
        if example.continues:
            if not runs or runs[-1][-1].page != example.page:
                raise ValueError(f"{example.name}: 'continues', but it is the first Python block of its page")
            runs[-1].append(example)
        else:
            runs.append([example])
    return runs


def chain_name(blocks: list[Example]) -> str:
    return "+".join([blocks[0].name, *(str(block.line) for block in blocks[1:])])


EXAMPLES = chains(all_examples())


def test_examples_found():
    """The collection itself: the README's example is among them, and no replacement has gone stale."""
    assert any(blocks[0].page.name == "README.md" for blocks in EXAMPLES)
    assert any(blocks[0].page.parent == DOCS / "guide" for blocks in EXAMPLES)  # the guides' folder is searched
    for blocks in EXAMPLES:
        for block in blocks:
            block.script()  # raises, naming the block, for a replacement whose text is gone


@pytest.mark.parametrize("blocks", EXAMPLES, ids=[chain_name(blocks) for blocks in EXAMPLES])
def test_example(blocks: list[Example], tmp_path: Path):
    for block in blocks:
        if block.skip_reason is not None:
            pytest.skip(f"{block.name}: not run: {block.skip_reason}")
    script = tmp_path / "example.py"
    script.write_text("\n".join(f"# {block.name}\n{block.script()}" for block in blocks), encoding="utf-8")
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg", PYTHONWARNINGS="ignore")
    env.setdefault("SDL_VIDEODRIVER", "dummy")  # classic-control envs render through pygame, headless here
    result = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT,
    )
    assert result.returncode == 0, (
        f"{chain_name(blocks)} failed:\n{script.read_text()}\n--- output\n{result.stdout}{result.stderr}"
    )


def test_sphinx_build(tmp_path: Path):
    for module in ("sphinx", "myst_parser", "sphinx_rtd_theme"):
        pytest.importorskip(module)  # the docs extra (also in the tests extra)
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "dummy", str(DOCS), str(tmp_path / "out")],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore"),
    )
    assert result.returncode == 0, f"sphinx-build failed:\n{result.stdout}{result.stderr}"
    assert (tmp_path / "out" / ".doctrees" / "api" / "cli.doctree").is_file()
