"""``stallscope compress``: the JSON contract end to end, exit codes and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
jsonschema = pytest.importorskip("jsonschema")
import polars as pl  # noqa: E402

from stallscope.cli.main import main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "stallscope" / "compress" / "report.schema.json").read_text())

FACTORIES = textwrap.dedent(
    """
    import torch
    from torch import nn
    from stallscope.compress.examples import resnet_digits

    def tiny_resnet():
        torch.manual_seed(0)
        return resnet_digits(width=16, blocks=(1, 1))

    def broken():
        raise ZeroDivisionError("boom in the factory")

    def not_a_model():
        return 42

    class NoOnnx(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            return self.fc(torch.special.bessel_j0(x.flatten(1)))

    def unexportable():
        return NoOnnx()
    """
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, digits8):
    root = tmp_path_factory.mktemp("cli")
    (root / "cc_factories.py").write_text(FACTORIES)
    np.savez(root / "digits8.npz", X_train=digits8.x_train, y_train=digits8.y_train, X_val=digits8.x_val,
             y_val=digits8.y_val, X_test=digits8.x_test, y_test=digits8.y_test)
    rgb = np.repeat(digits8.x_train[:60], 3, axis=1)
    np.savez(root / "rgb.npz", X=rgb, y=digits8.y_train[:60])
    sys.path.insert(0, str(root))
    yield root
    sys.path.remove(str(root))
    sys.modules.pop("cc_factories", None)


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_evaluate_json_follows_the_contract(workdir, capsys, tmp_path):
    store = tmp_path / "store"
    code, out, err = _run([
        "compress", "evaluate", "--model", "cc_factories:tiny_resnet", "--data", str(workdir / "digits8.npz"),
        "--train-epochs", "4", "--max-accuracy-drop", "0.02", "--budget-fractions", "1", "--target-macs", "0.5",
        "--finetune-epochs", "0.5", "--round-to", "4", "--runs", "20", "--runs-b32", "3", "--store", str(store),
        "--format", "json",
    ], capsys)
    assert code == 0, err
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    kinds = [c["kind"] for c in doc["candidates"]]
    assert kinds[:2] == ["dense", "quant"] and "prune" in kinds
    assert doc["runtime"] == "onnxruntime" and doc["device"] == "cpu"
    assert sum(c["recommended"] for c in doc["candidates"]) == 1
    rec = next(c for c in doc["candidates"] if c["recommended"])
    assert rec["within_budget"] and rec["name"] == doc["recommended"]
    # the recommendation is the fastest in-budget candidate at batch 1
    in_budget = [c for c in doc["candidates"] if c["within_budget"]]
    assert rec["latency_ms"]["b1"] == min(c["latency_ms"]["b1"] for c in in_budget)
    base = doc["baseline"]
    assert base["kind"] == "dense" and base["speedup"] == {"b1": 1.0, "b32": 1.0} and base["size_reduction"] == 0
    for c in doc["candidates"]:
        assert c["within_budget"] == (c["val_accuracy_drop_pp"] <= doc["max_accuracy_drop_pp"] + 1e-9)
        assert c["speedup"]["b1"] == pytest.approx(base["latency_ms"]["b1"] / c["latency_ms"]["b1"], rel=2e-3)
        assert c["size_reduction"] == pytest.approx(1 - c["size_bytes"] / base["size_bytes"], abs=1e-4)
    prune = next(c for c in doc["candidates"] if c["kind"] == "prune")
    assert prune["macs"] < base["macs"] and prune["params"] < base["params"]
    # the run folder holds the tables, the raw traces, and the same report
    run_dir = Path(doc["run_dir"])
    assert run_dir.parent == store / "compress"
    assert json.loads((run_dir / "report.json").read_text())["candidates"] == doc["candidates"]
    layers = pl.read_parquet(run_dir / "layer_latency.parquet")
    assert set(layers["candidate"]) == {c["name"] for c in doc["candidates"]}
    assert set(layers["runtime"]) == {"onnxruntime", "torch"}
    for trace in doc["traces"]:
        assert (run_dir / trace).is_file()
    runs = pl.read_parquet(run_dir / "run_latency.parquet").filter(pl.col("runtime") == "onnxruntime")
    dense_b1 = runs.filter((pl.col("candidate") == "dense-fp32") & (pl.col("batch") == 1))
    assert dense_b1.group_by("source").len().sort("source").rows() == [("ort_model_run", 20), ("wall", 20)]
    # headline = unprofiled pass; the profiler's own medians are kept beside it
    wall = dense_b1.filter(pl.col("source") == "wall")["dur_ns"].median() / 1e6
    profiled = dense_b1.filter(pl.col("source") == "ort_model_run")["dur_ns"].median() / 1e6
    assert doc["latency_source"] == "wall"
    assert base["latency_ms"]["b1"] == pytest.approx(wall, rel=1e-3)
    assert base["profiled_latency_ms"]["b1"] == pytest.approx(profiled, rel=1e-3)
    steps = pl.read_parquet(run_dir / "pruning_steps.parquet")
    assert len(steps) >= 1 and steps["accepted"].any()
    assert "progress" not in out and "pruning under" in err  # progress goes to stderr only


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "cc_factories:broken"], "--model cc_factories:broken: the factory raised ZeroDivisionError: boom"),
        (["--model", "cc_factories:not_a_model"], "returned int, not a torch.nn.Module"),
        (["--model", "cc_factories:unexportable"], "ONNX export of the model failed: No ONNX function found"),
        (["--model", "cc_factories:missing"], "has no attribute 'missing'"),
        (["--model", "no_such_pkg_zz:f"], "cannot import 'no_such_pkg_zz'"),
    ],
)
def test_bad_models_exit_2_with_one_line(workdir, capsys, tmp_path, argv, message):
    code, out, err = _run(["compress", "evaluate", *argv, "--data", str(workdir / "digits8.npz"),
                           "--store", str(tmp_path), "--quiet"], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("stallscope: error: ") and message in lines[0]
    assert "Traceback" not in err and out == ""


def test_dataset_of_the_wrong_shape_exits_2(workdir, capsys, tmp_path):
    code, _, err = _run(["compress", "evaluate", "--model", "cc_factories:tiny_resnet", "--data",
                         str(workdir / "rgb.npz"), "--store", str(tmp_path), "--quiet"], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "samples of shape (3, 8, 8)) does not fit the model" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--example", "resnet-digits", "--model", "cc_factories:tiny_resnet"], "either --model"),
        ([], "either --model"),
        (["--model", "cc_factories:tiny_resnet"], "--model needs --data"),
        (["--example", "resnet-digits", "--budget-fractions", "2"], "every fraction must be in (0, 1]"),
    ],
)
def test_usage_errors_exit_2(workdir, capsys, argv, message):
    code, _, err = _run(["compress", "evaluate", *argv], capsys)
    assert code == 2 and message in err


def test_help_does_not_import_torch():
    code = (
        "import sys\n"
        "from stallscope.cli.main import main\n"
        "for argv in (['--help'], ['compress', '--help'], ['compress', 'evaluate', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = [m for m in ('torch', 'onnx', 'onnxruntime', 'torch_pruning') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stdout
    assert "compress" in proc.stdout and "--max-accuracy-drop" in proc.stdout
