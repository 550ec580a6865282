"""The `tvm-latmodel` command: exit codes, messages, and the explain report."""

import json
import os

from tvm_latmodel.cli.main import main

LOGS = os.path.join(os.path.dirname(__file__), "..", "tuning_logs", "cpu", "C1D_0")


def test_unknown_workload_exits_2_with_a_clear_message(capsys):
    assert main(["explain", "--workload", "NOPE:0"]) == 2
    err = capsys.readouterr().err
    assert "unknown workload family 'NOPE'" in err and "C2D" in err


def test_bad_target_exits_2(capsys):
    assert main(["explain", "--workload", "GMM:0", "--target", "tpu9"]) == 2
    assert "unknown target 'tpu9'" in capsys.readouterr().err
    assert main(["tune", "--workload", "GMM:0", "--target", "h200", "--trials", "2"]) == 2
    assert "needs its own hardware" in capsys.readouterr().err


def test_explain_prints_every_term(capsys):
    assert main(["explain", "--workload", "GMM:0", "-n", "3", "--show", "1"]) == 0
    out = capsys.readouterr().out
    for term in ("wave quantization", "lane efficiency", "padded work ratio", "roofline bound", "bytes per unit"):
        assert term in out
    assert main(["explain", "--workload", "GMM:0", "-n", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["schedules"]) == 2
    assert doc["schedules"][0]["estimate_s"] <= doc["schedules"][1]["estimate_s"]


def test_explain_on_a_gpu_preset(capsys):
    assert main(["explain", "--workload", "GMM:0", "-n", "2", "--target", "h200", "--show", "1"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H200" in out and "occupancy: blocks_per_sm" in out


def test_train_on_a_committed_log_gives_a_pretrained_model(tmp_path, capsys):
    from tvm_latmodel.model.cost_model import HybridCostModel

    out = tmp_path / "model.json"
    assert main(["train", LOGS, "-o", str(out)]) == 0
    assert "trained the residual on" in capsys.readouterr().out
    m = HybridCostModel(pretrained=str(out))
    assert m.pretrained_model_ is not None


def test_train_names_a_bad_hardware_spec(tmp_path, capsys):
    spec = tmp_path / "board.json"
    spec.write_text('{"format": "tvm-latmodel-hardware", "format_version": 1, "spec": {"kind": "cpu"}')
    assert main(["train", LOGS, "-o", str(tmp_path / "m.json"), "--hardware", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "tvm-latmodel train: error:" in err and str(spec) in err
    assert not (tmp_path / "m.json").exists()
