"""The model cards of the shipped agents (``tools/model_cards.py``): every shipped agent has one, with its
learning curve and picture, and each card is what the script writes now from the agent's ``agent.json`` and the
grid CSVs, so that its numbers are the recorded ones."""

from pathlib import Path

import model_cards
import pytest

from sb3_ppo_ext.pretrained import agent_folder, list_pretrained, read_agent

AGENTS = list_pretrained()
#: The most an image beside an agent may weigh: they ship in the package.
MAX_IMAGE_BYTES = 100 * 1024
REGENERATE = "run `python tools/model_cards.py` (and `--pictures` for a new agent's picture)"


def test_there_are_shipped_agents():
    assert len(AGENTS) >= 6


@pytest.mark.parametrize("env_id", AGENTS)
def test_every_shipped_agent_has_a_current_card(env_id):
    folder = Path(agent_folder(env_id))
    for name in (model_cards.CARD_FILE, model_cards.CURVE_FILE, model_cards.PICTURE_FILE, model_cards.PICTURE_FACTS):
        assert (folder / name).is_file(), f"{folder / name} is missing: {REGENERATE}"
    for name in (model_cards.CURVE_FILE, model_cards.PICTURE_FILE):
        assert (folder / name).stat().st_size <= MAX_IMAGE_BYTES, f"{folder / name} is too large for the package"
    assert (folder / model_cards.CARD_FILE).read_text(encoding="utf-8") == model_cards.card(str(folder)), (
        f"the card of {env_id} is not what its agent.json and the CSVs give now: {REGENERATE}"
    )


@pytest.mark.parametrize("env_id", AGENTS)
def test_card_states_the_numbers_of_agent_json(env_id):
    folder, agent = read_agent(env_id)
    provenance = agent["provenance"]
    shipped = provenance["shipped_eval"]
    text = (Path(folder) / model_cards.CARD_FILE).read_text(encoding="utf-8")
    assert f"| seed | {provenance['seed']} |" in text
    assert f"| steps | {provenance['timesteps']:,} " in text
    assert f"({provenance['training_wall_s']:,.0f} s)" in text
    assert shipped["episodes"] >= 20  # an evaluation over many episodes, with its spread
    assert (
        f"{shipped['episodes']} deterministic episodes from env seed {shipped['seed']}: return "
        f"**{shipped['mean_return']:.1f} ± {shipped['std_return']:.1f}**"
    ) in text
    if "with_a_flag" in shipped:  # a flag run: its successes are flags reached
        assert f"**a flag reached in {shipped['with_a_flag']} of {shipped['episodes']}**" in text
    elif "successes" in shipped:
        assert f"**{shipped['successes']} of {shipped['episodes']} landed**" in text
    for key in agent["hyperparams"]:
        assert f"| `{key}` |" in text
    assert f"--pretrained --n-episodes {shipped['episodes']} --seed {shipped['seed']}" in text
    # Every shipped agent's training run is in a committed CSV, so its card has a learning curve.
    run = model_cards.find_learning_run(agent)
    assert run is not None and run.seed == provenance["seed"]


def test_cards_page_is_current():
    page = Path(model_cards.CARDS_PAGE)
    assert page.read_text(encoding="utf-8") == model_cards.cards_page(), f"{page} is stale: {REGENERATE}"


def test_learning_run_is_the_row_with_the_recorded_seed_step_and_score(tmp_path):
    header = "task,variant,seed,kind,timesteps,episodes,eval_mean,eval_std,wall_s,finished,success_rate\n"
    (tmp_path / "a.csv").write_text(header + "T-v0,other,1,periodic,100,10,-5.25,1.0,3.0,True,\n")
    (tmp_path / "b.csv").write_text(
        header
        + "T-v0,chosen,0,periodic,50,10,-9.0,1.0,1.5,True,\n"
        + "T-v0,chosen,0,periodic,100,10,-5.25,1.0,3.0,True,\n"
        + "T-v0,chosen,1,periodic,100,10,-7.0,1.0,3.0,True,\n"
        + "T-v0,chosen,0,final,101,100,-6.0,2.0,nan,True,\n"
    )
    (tmp_path / "notes.csv").write_text("not,a,grid\n1,2,3\n")
    agent = {"env_id": "T-v0", "provenance": {"seed": 0, "final_eval_timesteps": 100, "final_eval_mean": -5.25}}
    run = model_cards.find_learning_run(agent, results=str(tmp_path))
    assert (Path(run.csv_path).name, run.variant, run.seed, run.seeds) == ("b.csv", "chosen", 0, [0, 1])
    assert [row["timesteps"] for row in run.periodic(0)] == [50, 100]
    assert run.final(0)["eval_mean"] == -6.0
    agent["provenance"]["final_eval_mean"] = -5.0  # no evaluation had this score
    assert model_cards.find_learning_run(agent, results=str(tmp_path)) is None


@pytest.mark.parametrize(
    ("argument", "quoted"),
    [
        ("--seed", "--seed"),
        ("~/runs/grid/Pendulum-v1/clip/seed_0", "~/runs/grid/Pendulum-v1/clip/seed_0"),
        ("learning_rate:'lin_3e-4'", "\"learning_rate:'lin_3e-4'\""),
        ("a b", "'a b'"),
        ("x:'$HOME'", "'x:'\"'\"'$HOME'\"'\"''"),
    ],
)
def test_commands_are_quoted_for_the_shell(argument, quoted):
    assert model_cards._shell(argument) == quoted
