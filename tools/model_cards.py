"""Model cards of the shipped agents, written from what is recorded: each agent's ``agent.json`` and the learning
grid CSVs under ``docs/results/``.

    python tools/model_cards.py              # cards, learning curves and the docs page of every shipped agent
    python tools/model_cards.py --pictures   # also render each agent's picture (a few seconds per agent)
    python tools/model_cards.py --task-pictures  # the pictures of the bundled tasks without a shipped agent

For every agent folder (``sb3_ppo_ext/trained_agents/<agent>/``) this writes, next to the agent's files:

- ``README.md``: the card: task, algorithm and config, seed, steps, training wall clock, the evaluation of the
  shipped files over many episodes with its spread, where the run came from, the commands that train, pack and
  evaluate it again;
- ``curve.png``: the training run's periodic evaluations (and the other seeds of the same grid variant), with the
  shipped files' evaluation marked;
- ``picture.png`` (``--pictures``): frames of one deterministic episode, rendered off-screen (PyBullet's
  TinyRenderer for the bundled tasks) through the same rollout function as the video callbacks.

and ``docs/results/model_cards.md``, the cards of all agents on one page of the documentation site.

The training run of an agent is found in the grid CSVs (``benchmarks/grid.py collect``): the row of its task and
seed whose periodic evaluation, at the step of the run's last evaluation up to the packed model, has the mean return
that ``agent.json`` records (``final_eval_timesteps``, ``final_eval_mean``). An agent whose run is in no CSV yet gets
a card that says so. After ``tools/ship_agent.py`` packs an agent, ``--pictures --agents ENV_ID`` writes its card
and picture; after ``grid.py collect`` writes the run's CSV, run this script again for its curve.
``tests/test_model_cards.py`` checks that every shipped agent has a card, and that each card is what this script
writes from its ``agent.json`` now.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import glob
import json
import math
import os
import re
import shlex
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPOSITORY, "docs", "results")
DOCS = os.path.join(REPOSITORY, "docs")
#: The documentation page with every card.
CARDS_PAGE = os.path.join(RESULTS, "model_cards.md")
CARD_FILE, CURVE_FILE, PICTURE_FILE = "README.md", "curve.png", "picture.png"
#: What the picture shows (env, seed, the frames' steps), for its caption.
PICTURE_FACTS = "picture.json"
#: The files of an agent itself (what ``load_pretrained`` reads), as opposed to its card.
AGENT_FILES = ("agent.json", "policy.npz")
#: Folder of the pictures of bundled tasks that have no shipped agent (the tasks guide shows them).
TASK_PICTURES = os.path.join(DOCS, "guide", "images")
#: Frames in a picture, their height in pixels, and the longest stretch of the episode they span (steps).
PICTURE_FRAMES, PICTURE_HEIGHT, PICTURE_SPAN = 4, 180, 240
#: Env seed of the pictured episode: the first episode of the shipped files' evaluation (``ship_agent.py``).
PICTURE_SEED = 0
#: The bundled tasks without a shipped agent, pictured with the agent of a task with the same observations and actions.
STAND_INS = {
    "sb3_ppo_ext/HumanoidFlagrunHarder-v0": "sb3_ppo_ext/HumanoidFlagrun-v0",
}


# --- the training run of an agent, from the grid CSVs ---------------------------------------------------------


@dataclasses.dataclass
class LearningRun:
    """The grid run an agent was packed from: its CSV, variant and seed, and the rows of every seed of the variant."""

    csv_path: str
    task: str
    variant: str
    seed: int
    rows: list[dict[str, Any]]  # every row of (task, variant), all seeds, periodic and final

    def periodic(self, seed: int) -> list[dict[str, Any]]:
        return sorted(
            (row for row in self.rows if row["seed"] == seed and row["kind"] == "periodic"), key=lambda row: row["timesteps"]
        )

    def final(self, seed: int) -> dict[str, Any] | None:
        """The run's ``grid.py evaluate`` row (the final model, many episodes from env seed 10000), if any."""
        return next((row for row in self.rows if row["seed"] == seed and row["kind"] == "final"), None)

    @property
    def seeds(self) -> list[int]:
        return sorted({row["seed"] for row in self.rows})


def _read_grid_csv(path: str) -> list[dict[str, Any]]:
    """The rows of a CSV that ``grid.py collect`` wrote; none for another CSV."""
    from sb3_ppo_ext.grid.collect import read_csv

    with open(path, encoding="utf-8") as stream:
        header = next(csv.reader(stream), [])
    if not {"task", "variant", "seed", "kind", "timesteps", "episodes", "eval_mean", "eval_std"} <= set(header):
        return []
    return read_csv(path)


def find_learning_run(agent: dict[str, Any], results: str = RESULTS) -> LearningRun | None:
    """The grid run of ``agent`` in the CSVs of ``results`` (see the module docstring); ``None`` when none matches.
    Where several CSVs hold the run (a grid that reuses another's cells, a screening grid continued by a longer one),
    the one whose variant the provenance note names, then the one with the most evaluations of it."""
    provenance = agent["provenance"]
    steps, score = provenance.get("final_eval_timesteps"), provenance.get("final_eval_mean")
    if steps is None or score is None:
        return None
    found = []
    for path in sorted(glob.glob(os.path.join(results, "*.csv"))):
        rows = _read_grid_csv(path)
        for row in rows:
            if (
                row["task"] == agent["env_id"]
                and row["seed"] == provenance["seed"]
                and row["kind"] == "periodic"
                and row["timesteps"] == steps
                and math.isclose(row["eval_mean"], score, rel_tol=1e-9)
            ):
                variant_rows = [other for other in rows if other["task"] == row["task"] and other["variant"] == row["variant"]]
                found.append(LearningRun(path, row["task"], row["variant"], row["seed"], variant_rows))
                break
    if not found:
        return None
    note = provenance.get("note", "")
    return min(
        found,
        key=lambda run: (not re.search(rf"\b{re.escape(run.variant)}\b", note), -len(run.periodic(run.seed)), run.csv_path),
    )


def reports_citing(csv_path: str, results: str = RESULTS) -> list[str]:
    """The result reports (the Markdown pages of ``docs/results/``) that cite the CSV ``csv_path`` by its file name."""
    name = os.path.basename(csv_path)
    pages = []
    for page in sorted(glob.glob(os.path.join(results, "*.md"))):
        if os.path.abspath(page) == os.path.abspath(CARDS_PAGE):
            continue
        with open(page, encoding="utf-8") as stream:
            if re.search(rf"(?<![\w-]){re.escape(name)}", stream.read()):
                pages.append(page)
    return pages


def grid_cell(agent: dict[str, Any], run: LearningRun | None) -> tuple[str, Any] | None:
    """The grid file named in the agent's provenance note and its cell of the run (``grid.py``'s ``Cell``)."""
    match = re.search(r"benchmarks/grids/[\w.-]+\.yml", agent["provenance"].get("note", ""))
    if match is None or run is None or not os.path.isfile(os.path.join(REPOSITORY, match[0])):
        return None
    from sb3_ppo_ext.grid.cells import load_grid

    for cell in load_grid(os.path.join(REPOSITORY, match[0]), relative_to=REPOSITORY):
        if (cell.task, cell.variant, cell.seed) == (run.task, run.variant, run.seed):
            return match[0], cell
    return None


# --- the card ---------------------------------------------------------------------------------------------------


def _space(data: dict[str, Any]) -> str:
    if data["type"] == "Discrete":
        return f"Discrete({data['n']})"
    return f"{data['type']}{tuple(data['shape'])}".replace(",)", ")")


def _value(value: Any) -> str:
    return f"`{json.dumps(value)}`" if isinstance(value, (dict, list)) else f"`{value}`"


def _cell(text: str) -> str:
    """``text`` made safe for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _shell(argument: str) -> str:
    """``argument`` quoted for a POSIX shell, readably: as it is where it needs no quotes, a leading ``~/`` left
    unquoted (so that the shell expands it), double quotes around single-quoted config strings."""
    if argument.startswith("~/") and shlex.quote(argument[2:]) == argument[2:]:
        return argument
    quoted = shlex.quote(argument)
    if quoted != argument and "'" in argument and not set(argument) & set('"$`\\!'):
        return f'"{argument}"'
    return quoted


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min ({seconds:,.0f} s)"


def rate_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The two-sided Clopper-Pearson interval of a success rate measured as ``successes`` of ``trials``: exact for a
    binomial count, and never narrower than the measurement allows (0 or 1 included when nothing or everything
    succeeded)."""
    from scipy import stats  # the bench extra's (rliable's) dependency

    if not 0 <= successes <= trials or trials < 1:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes} of {trials}")
    tail = (1 - confidence) / 2
    low = float(stats.beta.ppf(tail, successes, trials - successes + 1)) if successes > 0 else 0.0
    high = float(stats.beta.ppf(1 - tail, successes + 1, trials - successes)) if successes < trials else 1.0
    return low, high


def _rate(successes: int, trials: int) -> str:
    """``successes`` of ``trials`` as a percentage with its 95% interval."""
    low, high = rate_interval(successes, trials)
    return f"{100 * successes / trials:.1f}%, 95% interval {100 * low:.1f}-{100 * high:.1f}%"


def shipped_evaluation(shipped: dict[str, Any]) -> str:
    """One line on the evaluation of the shipped files that ``agent.json`` records."""
    line = (
        f"{shipped['episodes']} deterministic episodes from env seed {shipped['seed']}: return "
        f"**{shipped['mean_return']:.1f} ± {shipped['std_return']:.1f}** (mean ± standard deviation over the "
        f"episodes)"
    )
    if "mean_length" in shipped:
        line += f", mean length {shipped['mean_length']:.1f} steps"
    line += f", {shipped['ended_early']} of {shipped['episodes']} ended before the time limit"
    if "with_a_flag" in shipped:
        # A flag run's success is a flag reached, and its distance along x measures nothing.
        return line + (
            f"; **a flag reached in {shipped['with_a_flag']} of {shipped['episodes']}** "
            f"({_rate(shipped['with_a_flag'], shipped['episodes'])}; {shipped['mean_flags']:.1f} flags per episode)"
        )
    if "successes" in shipped:
        failures = ", ".join(f"{reason.replace('_', ' ')} {count}" for reason, count in shipped.get("failures", {}).items())
        landed = f"{shipped['successes']} of {shipped['episodes']} landed"
        line += f"; **{landed}** ({_rate(shipped['successes'], shipped['episodes'])})"
        line += f" (failures: {failures})" if failures else ""
    if "mean_speed_m_s" in shipped:
        line += f"; mean speed {shipped['mean_speed_m_s']:.2f} m/s"
    return line


def _agent_size(folder: str) -> int:
    return sum(
        os.path.getsize(os.path.join(folder, name)) for name in AGENT_FILES if os.path.isfile(os.path.join(folder, name))
    )


def _picture_caption(folder: str) -> str:
    path = os.path.join(folder, PICTURE_FACTS)
    if not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as stream:
        facts = json.load(stream)
    return picture_caption(facts)


def picture_caption(facts: dict[str, Any]) -> str:
    """The caption of a picture from the facts :func:`render_picture` recorded beside it."""
    steps = ", ".join(str(step) for step in facts["steps"])
    when = f"steps {steps}"
    if facts.get("dt"):
        seconds = ", ".join(f"{step * facts['dt']:.2f}" for step in facts["steps"])
        when += f" ({seconds} s)"
    ended = f"; the episode ended at step {facts['length']}" if facts.get("ended") else ""
    agent = f"the shipped agent of `{facts['agent']}`" if facts["agent"] != facts["env_id"] else "the shipped agent"
    return (
        f"`{facts['env_id']}` played by {agent}, deterministic, env seed {facts['seed']}: frames at {when}{ended}. "
        f"Rendered off-screen with `python tools/model_cards.py --pictures`."
    )


def card(folder: str, *, level: int = 1, links_from: str | None = None) -> str:
    """The model card of the agent in ``folder`` (Markdown), from its ``agent.json`` and the grid CSVs.

    :param level: Markdown level of the card's title (its sections are one level below).
    :param links_from: the folder of the page the card is shown in (image and page paths are made relative to it);
        ``None``: the agent folder itself (the card's ``README.md``).
    """
    from sb3_ppo_ext.pretrained import read_agent

    folder, agent = read_agent(folder)
    links_from = folder if links_from is None else links_from
    provenance, shipped = agent["provenance"], agent["provenance"].get("shipped_eval")
    run = find_learning_run(agent)
    cell = grid_cell(agent, run)
    env_id = agent["env_id"]
    heading, section = "#" * level, "#" * (level + 1)

    def path(target: str) -> str:
        return os.path.relpath(target, links_from).replace(os.sep, "/")

    lines = (
        [f"{heading} `{env_id}`", ""]
        if level > 1
        else [
            f"{heading} Model card: `{env_id}`",
            "",
            "<!-- Written by tools/model_cards.py from agent.json and docs/results/*.csv: edit those, not this. -->",
            "",
        ]
    )
    if os.path.isfile(os.path.join(folder, PICTURE_FILE)):
        lines += [
            f"![{env_id}, the shipped agent]({path(os.path.join(folder, PICTURE_FILE))})",
            "",
            _picture_caption(folder),
            "",
        ]

    import gymnasium as gym

    import sb3_ppo_ext  # noqa: F401  (registers the bundled tasks)

    spec = gym.spec(env_id)
    task = (
        f"`{env_id}` (`{spec.entry_point}`), observations {_space(agent['observation_space'])}, actions "
        f"{_space(agent['action_space'])}"
    )
    if spec.max_episode_steps:
        task += f", episodes of at most {spec.max_episode_steps} steps"
    if spec.reward_threshold is not None:
        task += f", reward threshold {spec.reward_threshold:g}"
    if agent["env_kwargs"]:
        task += f"; `env_kwargs` {_value(agent['env_kwargs'])}"
    policy = f"`{agent['policy']}`" + (f", `policy_kwargs` {_value(agent['policy_kwargs'])}" if agent["policy_kwargs"] else "")
    if agent["use_sde"]:
        policy += ", gSDE"
    if agent.get("normalization"):
        policy += "; observations normalised with the run's frozen `VecNormalize` statistics (in `agent.json`)"
    model = provenance.get("model", "final")
    if model.startswith("checkpoint:"):
        model = f"the run's checkpoint saved at {int(model.split(':')[1]):,} steps (`ship_agent.py --model {model}`)"
    else:
        model = f"the run's {model} model"
    threads = provenance.get("torch_threads")
    wall = provenance.get("training_wall_s")
    rows = [
        ("task", task),
        ("algorithm", f"`{provenance.get('algo')}` (`sb3_ppo_ext.PPO`), policy {policy}"),
        ("seed", str(provenance.get("seed"))),
        ("steps", f"{provenance.get('timesteps'):,} ({model})"),
        (
            "training wall clock",
            "not recorded"
            if wall is None
            else f"{_minutes(wall)} with {threads} torch thread{'' if threads == 1 else 's'}, vec env: "
            f"{provenance.get('training_vec_env')}",
        ),
        ("evaluation of the shipped files", "not recorded" if shipped is None else shipped_evaluation(shipped)),
    ]
    if "final_eval_mean" in provenance:
        episodes = ""
        if run is not None:
            row = next(row for row in run.periodic(run.seed) if row["timesteps"] == provenance["final_eval_timesteps"])
            episodes = f" over {row['episodes']} episodes (± {row['eval_std']:.1f})"
        rows.append(
            (
                "the run's last evaluation up to it",
                f"{provenance['final_eval_mean']:.1f}{episodes} at "
                f"{provenance['final_eval_timesteps']:,} steps (rl-zoo3's periodic deterministic evaluation)",
            )
        )
    final = run.final(run.seed) if run is not None and provenance.get("model", "final") == "final" else None
    if final is not None:
        rows.append(
            (
                "the grid's evaluation of the final model",
                f"{final['episodes']} deterministic episodes from "
                f"env seed 10000 (`grid.py evaluate`): {final['eval_mean']:.1f} ± {final['eval_std']:.1f}",
            )
        )
    rows += [
        ("how it was made and chosen", provenance.get("note") or "not recorded"),
        ("files", f"`agent.json` and `policy.npz`, {_agent_size(folder) / 1024:.0f} KiB"),
    ]
    lines += ["| | |", "|---|---|", *(f"| {name} | {_cell(text)} |" for name, text in rows), ""]

    overrides = provenance.get("hyperparams_overrides")
    lines += [
        f"{section} Config",
        "",
        "The zoo config the run trained with (`hyperparams` in `agent.json`; the run's `--hyperparams` "
        f"overrides: {_value(overrides) if overrides else 'none'}):",
        "",
        "| key | value |",
        "|---|---|",
    ]
    lines += [f"| `{key}` | {_cell(_value(value))} |" for key, value in agent["hyperparams"].items()]
    lines.append("")

    lines += [f"{section} Learning curve", ""]
    if run is None:
        lines += [
            "No CSV under `docs/results/` holds this run's evaluations yet: collect its grid "
            "(`python benchmarks/grid.py collect`) and run `python tools/model_cards.py` again.",
            "",
        ]
    else:
        seeds = run.seeds
        others = [seed for seed in seeds if seed != run.seed]
        periodic = run.periodic(run.seed)
        lines += [
            f"![learning curve of {env_id}]({path(os.path.join(folder, CURVE_FILE))})",
            "",
            f"Mean return of rl-zoo3's periodic deterministic evaluation ({periodic[0]['episodes']} episodes every "
            f"{periodic[0]['timesteps']:,} steps; the band: ± their standard deviation) of the shipped run, seed "
            f"{run.seed} of variant `{run.variant}`"
            + (f", beside the variant's other seeds ({', '.join(map(str, others))})" if others else "")
            + "; the point with error bar: the shipped files' evaluation above. Data: "
            f"[`docs/results/{os.path.basename(run.csv_path)}`]({path(run.csv_path)})"
            + "".join(f", [{_page_title(page)}]({path(page)})" for page in reports_citing(run.csv_path))
            + ".",
            "",
        ]

    lines += [f"{section} Commands", "", "```bash"]
    if cell is not None and run is not None:  # grid_cell finds a cell only for a run
        grid_file, grid_cell_ = cell
        cell_folder = f"~/runs/grid/{env_id.replace('/', '-')}/{run.variant}/seed_{run.seed}"
        lines += [
            "# train (the grid cell; one process, one torch thread)",
            f"python benchmarks/grid.py run {grid_file} --root ~/runs/grid --tasks {env_id} "
            f"--only {run.variant} --seeds {run.seed}",
            "# which runs",
            "sb3-ppo-ext "
            + " ".join(
                _shell(os.path.relpath(arg, REPOSITORY) if arg.startswith(REPOSITORY + os.sep) else arg)
                for arg in grid_cell_.train_argv(cell_folder)
            ),
            "# pack the agent and evaluate the packed files",
            f"python tools/ship_agent.py {cell_folder}"
            + ("" if provenance.get("model", "final") == "final" else f" --model {provenance['model']}")
            + f" --eval-episodes {shipped['episodes'] if shipped else 100}"
            + (f" --eval-seed {shipped['seed']}" if shipped and shipped["seed"] != 0 else ""),
        ]
    if shipped is not None:
        lines += [
            "# the evaluation above, with each episode's return (and min, max)",
            f"sb3-ppo-ext enjoy --env {env_id} --pretrained --n-episodes {shipped['episodes']} "
            f"--seed {shipped['seed']} --no-render",
        ]
    lines += [f"sb3-ppo-ext record-video --env {env_id} --pretrained -n 1000", "```", ""]
    return "\n".join(lines)


def _anchor(env_id: str) -> str:
    """The anchor MyST and GitHub give the heading `` `env_id` ``."""
    return re.sub(r"[^\w\- ]", "", env_id.lower()).replace(" ", "-")


def _page_title(page: str) -> str:
    with open(page, encoding="utf-8") as stream:
        for line in stream:
            if line.startswith("# "):
                return line[2:].strip()
    return os.path.splitext(os.path.basename(page))[0]


def cards_page() -> str:
    """``docs/results/model_cards.md``: a list of the shipped agents, then every card."""
    from sb3_ppo_ext.pretrained import agent_folder, list_pretrained

    page = [
        "# Model cards of the shipped agents",
        "",
        "<!-- Written by tools/model_cards.py from each agent's agent.json and docs/results/*.csv: run it "
        "again rather than editing this page. -->",
        "",
        "One card per agent shipped in `sb3_ppo_ext/trained_agents/` (the same card is the `README.md` in the "
        "agent's folder): the task, the config it trained with, its seed, steps and wall clock, the evaluation "
        "of the shipped files over many deterministic episodes with its spread, the learning curve of its run and "
        "a picture. "
        "Every number comes from the agent's `agent.json` (written by `tools/ship_agent.py` when the agent "
        "was packed and evaluated) or from the learning grid's CSV; `tests/test_model_cards.py` checks that each "
        "card is what `python tools/model_cards.py` writes from them.",
        "",
        *(f"- [`{env_id}`](#{_anchor(env_id)})" for env_id in list_pretrained()),
        "",
    ]
    for env_id in list_pretrained():
        page.append(card(agent_folder(env_id), level=2, links_from=os.path.dirname(CARDS_PAGE)))
    return "\n".join(page)


# --- the learning curve -----------------------------------------------------------------------------------------


def plot_curve(folder: str, output: str) -> bool:
    """Plot the learning curve of the agent in ``folder`` into ``output`` (a small PNG); ``False`` when its run is in
    no CSV."""
    import matplotlib

    matplotlib.use("Agg")
    import gymnasium as gym
    import matplotlib.pyplot as plt

    import sb3_ppo_ext  # noqa: F401
    from sb3_ppo_ext.pretrained import read_agent

    folder, agent = read_agent(folder)
    run = find_learning_run(agent)
    if run is None:
        return False
    provenance, shipped = agent["provenance"], agent["provenance"].get("shipped_eval")
    figure, axis = plt.subplots(figsize=(6.0, 3.2))
    for seed in run.seeds:
        rows = run.periodic(seed)
        if seed != run.seed and rows:
            axis.plot(
                [row["timesteps"] / 1e6 for row in rows],
                [row["eval_mean"] for row in rows],
                color="0.7",
                linewidth=0.8,
                label="other seeds" if seed == next(s for s in run.seeds if s != run.seed) else None,
            )
    rows = run.periodic(run.seed)
    steps = np.array([row["timesteps"] for row in rows]) / 1e6
    means = np.array([row["eval_mean"] for row in rows])
    spread = np.array([row["eval_std"] for row in rows])
    axis.plot(steps, means, color="tab:blue", linewidth=1.5, label=f"seed {run.seed} (shipped)")
    axis.fill_between(steps, means - spread, means + spread, color="tab:blue", alpha=0.15, linewidth=0)
    if shipped is not None:
        axis.errorbar(
            [provenance["timesteps"] / 1e6],
            [shipped["mean_return"]],
            yerr=[shipped["std_return"]],
            fmt="o",
            color="tab:red",
            capsize=3,
            markersize=4,
            label=f"shipped files, {shipped['episodes']} episodes",
        )
    threshold = gym.spec(agent["env_id"]).reward_threshold
    if threshold is not None:
        axis.axhline(threshold, color="0.4", linestyle="--", linewidth=0.8, label=f"reward threshold {threshold:g}")
    axis.set_title(f"{agent['env_id']} ({run.variant})", fontsize=10)
    axis.set_xlabel("environment steps (millions)", fontsize=9)
    axis.set_ylabel("evaluation return", fontsize=9)
    axis.tick_params(labelsize=8)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    save_small_png(figure, output)
    plt.close(figure)
    return True


def save_small_png(figure: Any, output: str) -> None:
    """Save a Matplotlib figure as a palette PNG (a few tens of KiB: the files ship in the package)."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    figure.savefig(buffer, dpi=80, format="png")
    buffer.seek(0)
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(output, optimize=True)


# --- the picture ------------------------------------------------------------------------------------------------


def _inner_env(env: Any) -> Any:
    """The gymnasium env inside a ``DummyVecEnv`` (through ``VecNormalize`` and other ``VecEnv`` wrappers)."""
    while not hasattr(env, "envs"):
        env = env.venv
    return env.envs[0]


def episode_frames(
    agent_folder_or_id: str, env_id: str | None = None, seed: int = PICTURE_SEED, max_steps: int = PICTURE_SPAN
) -> tuple[list[np.ndarray], bool, float | None]:
    """Frames of one deterministic episode of an agent (at most ``max_steps`` steps): the frames, whether the
    episode ended within them, and the env's seconds per step (``None`` when it has no ``dt``).

    :param env_id: play this task instead of the agent's own (one with the same spaces).
    """
    from sb3_ppo_ext.callbacks._media import rollout_frames
    from sb3_ppo_ext.callbacks._vec_normalize import observation_normalizer
    from sb3_ppo_ext.pretrained import load_pretrained, make_pretrained_env, read_agent

    model, env = load_pretrained(agent_folder_or_id, seed=seed, render_mode="rgb_array")
    if env_id is not None:
        _, agent = read_agent(agent_folder_or_id)
        env.close()
        env = make_pretrained_env({**agent, "env_id": env_id}, seed=seed, render_mode="rgb_array")
    normalize = observation_normalizer(env)
    try:
        inner = _inner_env(env)
        frames = rollout_frames(
            inner, lambda observation: model.predict(normalize(observation), deterministic=True)[0], max_steps, seed=seed
        )
        dt = getattr(inner.unwrapped, "dt", None)
    finally:
        env.close()
    return frames, len(frames) <= max_steps, None if dt is None else float(dt)


def render_picture(
    output: str, agent_folder_or_id: str, env_id: str | None = None, seed: int = PICTURE_SEED
) -> dict[str, Any]:
    """Write a strip of :data:`PICTURE_FRAMES` frames, evenly spaced over the first :data:`PICTURE_SPAN` steps of one
    deterministic episode (or the whole episode when shorter), as a palette PNG, and the facts of its caption
    beside it (the same name with ``.json``); returns those facts."""
    from PIL import Image

    from sb3_ppo_ext.pretrained import read_agent

    _, agent = read_agent(agent_folder_or_id)
    frames, ended, dt = episode_frames(agent_folder_or_id, env_id, seed)
    chosen = [round(float(step)) for step in np.linspace(0, len(frames) - 1, PICTURE_FRAMES)]
    images = []
    for step in chosen:
        image = Image.fromarray(frames[step])
        width = round(image.width * PICTURE_HEIGHT / image.height)
        images.append(image.resize((width, PICTURE_HEIGHT), Image.Resampling.LANCZOS))
    gap = 4
    strip = Image.new("RGB", (sum(image.width for image in images) + gap * (len(images) - 1), PICTURE_HEIGHT), (160, 160, 160))
    x = 0
    for image in images:
        strip.paste(image, (x, 0))
        x += image.width + gap
    strip.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(output, optimize=True)
    facts = {
        "env_id": env_id or agent["env_id"],
        "agent": agent["env_id"],
        "seed": seed,
        "steps": chosen,
        "dt": dt,
        "ended": ended,
        "length": len(frames) - 1,
    }
    with open(os.path.splitext(output)[0] + ".json", "w", encoding="utf-8") as stream:
        json.dump(facts, stream, indent=1)
        stream.write("\n")
    return facts


# --- writing ----------------------------------------------------------------------------------------------------


def write_card(folder: str, pictures: bool = False) -> list[str]:
    """Write the card (and curve, and with ``pictures`` the picture) of the agent in ``folder``; returns the paths."""
    written = []
    if pictures:
        render_picture(os.path.join(folder, PICTURE_FILE), folder)
        written += [os.path.join(folder, PICTURE_FILE), os.path.join(folder, PICTURE_FACTS)]
    if plot_curve(folder, os.path.join(folder, CURVE_FILE)):
        written.append(os.path.join(folder, CURVE_FILE))
    with open(os.path.join(folder, CARD_FILE), "w", encoding="utf-8") as stream:
        stream.write(card(folder))
    written.append(os.path.join(folder, CARD_FILE))
    return written


def write_cards_page() -> str:
    with open(CARDS_PAGE, "w", encoding="utf-8") as stream:
        stream.write(cards_page())
    return CARDS_PAGE


def task_picture_path(env_id: str) -> str:
    return os.path.join(TASK_PICTURES, env_id.split("/")[-1] + ".png")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pictures", action="store_true", help="also render each agent's picture")
    parser.add_argument(
        "--task-pictures",
        action="store_true",
        help="render the pictures of the bundled tasks without a shipped agent (docs/guide/images/)",
    )
    parser.add_argument("--agents", nargs="+", default=None, help="only these env ids (default: every shipped agent)")
    args = parser.parse_args(argv)

    from sb3_ppo_ext.pretrained import agent_folder, list_pretrained

    for env_id in args.agents or list_pretrained():
        for path in write_card(agent_folder(env_id), pictures=args.pictures):
            print(f"wrote {os.path.relpath(path, REPOSITORY)} ({os.path.getsize(path) / 1024:.0f} KiB)")
    if args.task_pictures:
        os.makedirs(TASK_PICTURES, exist_ok=True)
        for env_id, stand_in in STAND_INS.items():
            path = task_picture_path(env_id)
            render_picture(path, stand_in, env_id=env_id)
            print(f"wrote {os.path.relpath(path, REPOSITORY)} ({os.path.getsize(path) / 1024:.0f} KiB)")
    print(f"wrote {os.path.relpath(write_cards_page(), REPOSITORY)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
