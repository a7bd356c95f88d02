"""The Table 1 recipes (examples/table1/*.yaml): one per contract, each declaring its contract once and the
other rows by ``extends``. Each parses, passes ``check`` with dummy credentials (no network), is priced
by ``estimate``, and reproduces the shipped rows' config hashes (the paper's rows, not something near)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from giant_assets.agents.estimate import estimate_experiment
from giant_assets.agents.pricing import experiment_prices
from giant_assets.experiments.declared import load_experiments
from giant_assets.multipathqa.loading import parse_items, read_csv_strings
from giant_assets.multipathqa.sample import sample_csv_path
from giant_assets.platform.experiments_cli import main

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "examples" / "table1"
CONTRACTS = ("openai", "azure", "bedrock", "vertex", "gemini")
SHIPPED = load_experiments(REPO / "experiments.yaml")
DUMMY = "dummy-not-a-key-0123456789"
ROWS = ("giant", "giant-x5", "thumbnail", "patch")


@pytest.fixture
def dummy_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, DUMMY)
    for name in ("GIANT_AZURE_AUTH", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GIANT_PRICES"):
        monkeypatch.delenv(name, raising=False)


def _recipe(tmp_path: Path, contract: str) -> Path:
    """The recipe as a user fills it in: the Azure placeholder replaced by a resource's endpoint."""
    text = (RECIPES / f"{contract}.yaml").read_text(encoding="utf-8")
    path = tmp_path / f"{contract}.yaml"
    path.write_text(text.replace("YOUR-RESOURCE", "lab-resource"), encoding="utf-8")
    return path


def test_recipes_are_the_five_contracts() -> None:
    assert sorted(p.stem for p in RECIPES.glob("*.yaml")) == sorted(CONTRACTS)


@pytest.mark.parametrize("contract", CONTRACTS)
def test_recipe_passes_check_and_every_row_is_priced(
    contract: str, tmp_path: Path, dummy_credentials: None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _recipe(tmp_path, contract)
    assert main(["--file", str(path), "check"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "4 experiment(s), 0 declared benchmark(s), all valid" in out and DUMMY not in out
    declared = load_experiments(path)
    # the four rows, one of each agent; x5 is x1 with five runs and the same result set (its run 0 reused)
    agents = sorted((e.agent, e.runs_per_item) for e in declared.values())
    assert agents == [("giant", 1), ("giant", 5), ("patch", 1), ("thumbnail", 1)]
    giant = next(e for e in declared.values() if e.agent == "giant" and e.runs_per_item == 1)
    x5 = next(e for e in declared.values() if e.runs_per_item == 5)
    assert x5.config_hash() == giant.config_hash()
    # one contract: every row calls the same provider, model and endpoint as the GIANT row
    assert {(e.provider, e.model, e.endpoint, e.region, e.project) for e in declared.values()} == {
        (giant.provider, giant.model, giant.endpoint, giant.region, giant.project)
    }
    raw = parse_items(read_csv_strings(sample_csv_path()), "sample")[0]
    for exp in declared.values():
        estimates = estimate_experiment(exp, raw, journals_dir=tmp_path / "j", prices=experiment_prices(exp))
        # by hand from the sample CSV: gtex, panda, tcga, tcga_expert_vqa, tcga_slidebench
        assert [e.items for e in estimates] == [3, 3, 3, 2, 3]
        assert all(e.priced and math.isfinite(e.usd.low) and e.usd.low > 0 for e in estimates), exp.name


def test_the_azure_placeholder_is_refused_until_replaced(
    tmp_path: Path, dummy_credentials: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--file", str(RECIPES / "azure.yaml"), "check"]) == 1
    assert "field 'azure_endpoint': still the placeholder YOUR-RESOURCE" in capsys.readouterr().err


def test_the_openai_recipe_is_the_papers_rows() -> None:
    recipe = load_experiments(RECIPES / "openai.yaml")
    assert sorted(recipe) == ["gpt5-giant", "gpt5-giant-x5", "gpt5-patch", "gpt5-thumbnail"]
    for name, exp in recipe.items():
        assert exp.config_hash() == SHIPPED[name].config_hash(), name
        assert exp.answer_settings() == SHIPPED[name].answer_settings(), name  # runs_per_item too
        assert exp.budget_usd == SHIPPED[name].budget_usd


@pytest.mark.parametrize(
    ("contract", "shipped"),
    [("azure", "azure-gpt5-giant"), ("bedrock", "bedrock-claude-giant"),
     ("vertex", "vertex-claude-giant"), ("gemini", "gemini-giant")],
)  # fmt: skip
def test_each_recipes_giant_row_is_the_shipped_example(contract: str, shipped: str) -> None:
    assert (
        load_experiments(RECIPES / f"{contract}.yaml")[shipped].config_hash()
        == SHIPPED[shipped].config_hash()
    )


def test_gemini_through_vertex_is_one_edit_of_the_contract_block(tmp_path: Path) -> None:
    text = (RECIPES / "gemini.yaml").read_text(encoding="utf-8")
    edited = text.replace(
        "    provider: gemini\n",
        "    provider: gemini\n    region: us-central1\n    project: your-gcp-project\n",
    )
    assert edited.count("region:") == 1 + text.count("region:")
    path = tmp_path / "gemini-vertex.yaml"
    path.write_text(edited, encoding="utf-8")
    declared = load_experiments(path)
    assert all(e.vertex_ai and e.region == "us-central1" for e in declared.values())
    assert declared["gemini-giant"].config_hash() == SHIPPED["vertex-gemini-giant"].config_hash()


def test_extends_derived_rows_hash_as_written_out_in_full(tmp_path: Path) -> None:
    """The Bedrock recipe's rows, each written out in full by hand: the same experiments."""
    contract = {"provider": "bedrock", "region": "us-east-1", "model": "claude-sonnet-4-5"}
    full = {
        "bedrock-claude-giant": contract | {"agent": "giant", "budget_usd": 50},
        "bedrock-claude-giant-x5": contract | {"agent": "giant", "runs_per_item": 5, "budget_usd": 250},
        "bedrock-claude-thumbnail": contract
        | {"agent": "thumbnail", "thumbnail_size": 1024, "budget_usd": 10},
        "bedrock-claude-patch": contract | {"agent": "patch", "budget_usd": 60},
    }
    import yaml

    path = tmp_path / "full.yaml"
    path.write_text(yaml.safe_dump({"experiments": full}), encoding="utf-8")
    written, derived = load_experiments(path), load_experiments(RECIPES / "bedrock.yaml")
    assert sorted(written) == sorted(derived)
    for name, exp in written.items():
        assert derived[name].config_hash() == exp.config_hash(), name
        assert derived[name].model_dump(exclude={"description"}) == exp.model_dump(exclude={"description"})
