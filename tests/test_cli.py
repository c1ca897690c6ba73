"""The ``ik-layer`` command line and its file formats, checked against ``robot.fk``."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import torch

import ik_layer
import ik_layer.cli.main as cli
from ik_layer import load_robot, solve
from ik_layer.cli.files import BASE_COLUMNS, POSE_COLUMNS, pose_columns, q_columns
from ik_layer.cli.main import main
from ik_layer.engine.scheduler import lone_budget
from ik_layer.model.lie import matrix_to_pose, pose_error, pose_to_matrix
from ik_layer.robots import builtin_robots
from ik_layer.testing import ServerProcess, random_configurations

ROOT = Path(__file__).resolve().parent.parent
ROBOT = "panda"
TOL = (1e-4, 1e-3)


@pytest.fixture(scope="module")
def robot():
    return load_robot(ROBOT)


@pytest.fixture(scope="module")
def q_true(robot) -> torch.Tensor:
    """Six random configurations of the robot inside its limits."""
    return robot.random_q((6,), generator=torch.Generator().manual_seed(7))


@pytest.fixture(scope="module")
def poses(robot, q_true) -> np.ndarray:
    """(6, 7) reachable targets: FK of :func:`q_true`."""
    return matrix_to_pose(robot.fk(q_true)).numpy()


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_targets(path: Path, poses: np.ndarray) -> Path:
    """Targets in the format given by ``path``'s suffix."""
    if path.suffix == ".csv":
        return write_csv(path, list(POSE_COLUMNS), poses.tolist())
    if path.suffix == ".npz":
        np.savez(path, target=poses)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(dict(zip(POSE_COLUMNS, p, strict=False))) + "\n" for p in poses.tolist()))
    return path


def read_result(path: Path, dof: int) -> dict[str, np.ndarray]:
    """Fields q, success, position_error, iterations, line, status of a solve output in any format."""
    fields = ("q", "success", "position_error", "iterations", "line", "status")
    if path.suffix == ".npz":
        with np.load(path) as data:
            return {k: data[k] for k in fields}
    if path.suffix == ".jsonl":
        records = [json.loads(line) for line in path.read_text().splitlines()]
        return {k: np.array([r[k] for r in records]) for k in fields}
    with path.open() as f:
        rows = list(csv.DictReader(f))
    names = list(rows[0])[1 : 1 + dof]
    return {
        "q": np.array([[float(r[n]) for n in names] for r in rows]),
        "success": np.array([r["success"] == "True" for r in rows]),
        "position_error": np.array([float(r["position_error"]) for r in rows]),
        "iterations": np.array([int(r["iterations"]) for r in rows]),
        "line": np.array([int(r["line"]) for r in rows]),
        "status": np.array([r["status"] for r in rows]),
    }


def assert_reaches(robot, q: np.ndarray, poses: np.ndarray) -> None:
    """Every configuration's FK is within the solver tolerances of its target pose."""
    err = pose_error(pose_to_matrix(torch.as_tensor(poses)), robot.fk(torch.as_tensor(q)))
    assert err[:, :3].norm(dim=-1).max() <= TOL[0]
    assert err[:, 3:].norm(dim=-1).max() <= TOL[1]


@pytest.mark.parametrize("suffix", [".csv", ".npz", ".jsonl"])
def test_solve_round_trip_reaches_targets(tmp_path, robot, poses, suffix, capsys):
    targets = write_targets(tmp_path / f"targets{suffix}", poses)
    out = tmp_path / f"out{suffix}"
    assert main(["solve", ROBOT, str(targets), "-o", str(out), "--random-seed", "0", "--batch-size", "4"]) == 0
    result = read_result(out, robot.dof)
    assert result["success"].all() and len(result["q"]) == len(poses)
    assert result["status"].tolist() == ["solved"] * len(poses)
    assert_reaches(robot, result["q"], poses)
    assert "6/6 solved" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".csv", ".npz", ".jsonl"])
def test_solve_stops_at_the_timeout_with_status_deadline(tmp_path, suffix, capsys):
    """planar3's targets lifted off its plane: never met; the budget would take long, the timeout stops it."""
    planar = ik_layer.load_robot("planar3")
    target = planar.fk(planar.random_q((2,), generator=torch.Generator().manual_seed(3)))
    target[:, 2, 3] += 0.2
    targets = write_targets(tmp_path / f"targets{suffix}", matrix_to_pose(target).numpy())
    out = tmp_path / f"out{suffix}"
    budget = ["--max-iterations", "10000", "--num-seeds", "64", "--restart-after", "50"]
    assert main(["solve", "planar3", str(targets), "-o", str(out), "--timeout", "0.2", *budget]) == 0
    result = read_result(out, planar.dof)
    assert result["status"].tolist() == ["deadline", "deadline"] and not result["success"].any()
    options = ik_layer.SolveOptions(max_iterations=10000, num_seeds=64, restart_after=50)
    assert (result["iterations"] < lone_budget(options)).all()  # (each target's seeds one after another)
    with pytest.raises(SystemExit):
        main(["solve", "planar3", str(targets), "-o", str(out), "--timeout", "0"])
    assert "positive number of seconds" in capsys.readouterr().err


def test_solve_uses_warm_start_file_and_keeps_source_lines(tmp_path, robot, q_true, poses, capsys):
    targets = write_targets(tmp_path / "targets.csv", poses)
    seeds = write_csv(tmp_path / "seeds.csv", robot.joint_names, q_true.tolist())
    out = tmp_path / "out.npz"
    code = main(["solve", ROBOT, str(targets), "-o", str(out), "--warm-start", str(seeds), "--num-seeds", "1"])
    assert code == 0
    result = read_result(out, robot.dof)
    assert (result["iterations"] <= 1).all()  # warm starts at the answers: solved at once
    assert result["line"].tolist() == list(range(2, 2 + len(poses)))


def test_fk_matches_robot_fk(tmp_path, robot, q_true, capsys):
    q_file = write_csv(tmp_path / "q.csv", robot.joint_names, q_true.tolist())
    assert main(["fk", ROBOT, str(q_file)]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    pose = np.array([[float(r[c]) for c in POSE_COLUMNS] for r in rows])
    expected = robot.fk(q_true)
    err = pose_error(expected, pose_to_matrix(torch.as_tensor(pose)))
    assert err.abs().max() < 1e-12


def test_fk_output_feeds_solve(tmp_path, robot, q_true):
    """fk writes poses that solve reads back (npz keys and CSV columns line up)."""
    np.save(tmp_path / "q.npy", q_true.numpy())
    for suffix in (".npz", ".csv"):
        poses_file, out = tmp_path / f"poses{suffix}", tmp_path / f"out{suffix}"
        assert main(["fk", ROBOT, str(tmp_path / "q.npy"), "-o", str(poses_file)]) == 0
        assert main(["solve", ROBOT, str(poses_file), "-o", str(out), "--random-seed", "1"]) == 0
        assert_reaches(robot, read_result(out, robot.dof)["q"], matrix_to_pose(robot.fk(q_true)).numpy())


def test_locked_joints_stay_at_their_values(tmp_path, robot):
    """--locked folds a joint away: fk and solve use the 6 others, and the pose is the full arm's at that value."""
    locked = ["--locked", "panda_joint4=-1.5"]
    held = ik_layer.load_robot(ROBOT, locked={"panda_joint4": -1.5})
    q = held.random_q((4,), generator=torch.Generator().manual_seed(5))
    full = torch.cat([q[:, :3], torch.full((4, 1), -1.5, dtype=q.dtype), q[:, 3:]], dim=1)
    np.save(tmp_path / "q.npy", q.numpy())
    assert main(["fk", ROBOT, str(tmp_path / "q.npy"), "-o", str(tmp_path / "poses.npz"), *locked]) == 0
    poses = np.load(tmp_path / "poses.npz")["pose"]
    np.testing.assert_allclose(poses, matrix_to_pose(robot.fk(full)).numpy(), atol=1e-12)
    out = tmp_path / "out.npz"
    assert main(["solve", ROBOT, str(tmp_path / "poses.npz"), "-o", str(out), "--random-seed", "3", *locked]) == 0
    answer = torch.as_tensor(read_result(out, held.dof)["q"])
    assert answer.shape == (4, 6)
    assert_reaches(robot, torch.cat([answer[:, :3], full[:, 3:4], answer[:, 3:]], dim=1).numpy(), poses)


@pytest.mark.parametrize("suffix", [".csv", ".npz", ".jsonl"])
def test_several_frames_round_trip_through_fk_and_solve(tmp_path, suffix):
    """--ee-frames: fk writes FRAME.x ... FRAME.qw per frame, solve reads them back and reaches every frame."""
    frames = ["--ee-frames", "panda_link8,panda_hand_tcp"]
    robot = ik_layer.load_robot(ROBOT, ee_frames=["panda_link8", "panda_hand_tcp"])
    q = robot.random_q((3,), generator=torch.Generator().manual_seed(6))
    np.save(tmp_path / "q.npy", q.numpy())
    poses_file, out = tmp_path / f"poses{suffix}", tmp_path / f"out{suffix}"
    assert main(["fk", ROBOT, str(tmp_path / "q.npy"), "-o", str(poses_file), *frames]) == 0
    if suffix == ".csv":
        header = poses_file.read_text().splitlines()[0].split(",")
        assert header[1:4] == ["panda_link8.x", "panda_link8.y", "panda_link8.z"] and header[-1] == "panda_hand_tcp.qw"
    assert main(["solve", ROBOT, str(poses_file), "-o", str(out), "--random-seed", "4", *frames]) == 0
    answer = torch.as_tensor(read_result(out, robot.dof)["q"])
    err = pose_error(robot.fk(q), robot.fk(answer))  # (3, 2, 6): both frames of every row
    assert err[..., :3].norm(dim=-1).max() <= TOL[0] and err[..., 3:].norm(dim=-1).max() <= TOL[1]


@pytest.mark.parametrize("flag", ["panda_joint4", "panda_joint4=x", "=1"])
def test_malformed_locked_flags_exit_2(tmp_path, flag, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fk", ROBOT, str(tmp_path / "q.npy"), "--locked", flag])
    assert exit_info.value.code == 2 and "JOINT=VALUE" in capsys.readouterr().err


def test_robots_lists_builtins(capsys):
    assert main(["robots"]) == 0
    out = capsys.readouterr().out
    for name in builtin_robots():
        assert f"{name}: " in out
    assert "panda_joint7" in out and "7 dof" in out


def _nan_targets(tmp_path: Path, poses: np.ndarray) -> Path:
    rows = poses.tolist()
    rows[1][0] = "nan"  # file line 3
    rows[3][4] = ""  # file line 5: missing cell
    return write_csv(tmp_path / "targets.csv", list(POSE_COLUMNS), rows)


def test_nan_rows_refused_with_line_numbers(tmp_path, poses, capsys):
    targets = _nan_targets(tmp_path, poses)
    assert main(["solve", ROBOT, str(targets), "-o", str(tmp_path / "out.csv")]) == 2
    err = capsys.readouterr().err
    assert "line(s) 3, 5" in err and "--on-invalid skip" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out.csv").exists()


def test_nan_rows_skipped_on_request(tmp_path, robot, poses, capsys):
    targets = _nan_targets(tmp_path, poses)
    out = tmp_path / "out.csv"
    assert main(["solve", ROBOT, str(targets), "-o", str(out), "--on-invalid", "skip", "--random-seed", "2"]) == 0
    assert "skipped 2 invalid row(s)" in capsys.readouterr().err
    result = read_result(out, robot.dof)
    assert result["line"].tolist() == [2, 4, 6, 7]
    assert_reaches(robot, result["q"], poses[[0, 2, 4, 5]])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["solve", ROBOT, "{tmp}/missing.csv", "-o", "{tmp}/o.csv"], "no such file"),
        (["solve", ROBOT, "{tmp}/wrong.csv", "-o", "{tmp}/o.csv"], "header lacks column(s) qw"),
        (["solve", ROBOT, "{tmp}/bad.jsonl", "-o", "{tmp}/o.csv"], "line 2 is not JSON"),
        (["solve", ROBOT, "{tmp}/wrong.npy", "-o", "{tmp}/o.csv"], "shape (3, 4)"),
        (["solve", "no_such_robot", "{tmp}/wrong.csv", "-o", "{tmp}/o.csv"], "unknown robot 'no_such_robot'"),
        (["fk", ROBOT, "{tmp}/wrong.csv"], "header lacks column(s) panda_joint1"),
        (["fk", ROBOT, "{tmp}/wrong.txt"], "unknown format .txt"),
        (["solve", ROBOT, "{tmp}/wrong.csv", "-o", "{tmp}/o.npy"], "cannot write .npy"),
        (["solve", ROBOT, "{tmp}/wrong.csv", "-o", "{tmp}/no/o.csv"], "does not exist"),
    ],
)
def test_bad_inputs_exit_2_with_one_line(tmp_path, argv, message, capsys):
    write_csv(tmp_path / "wrong.csv", ["x", "y", "z", "qx", "qy", "qz"], [[0, 0, 0, 0, 0, 0]])
    (tmp_path / "bad.jsonl").write_text('{"pose": [0, 0, 0, 0, 0, 0, 1]}\n{oops\n')
    (tmp_path / "wrong.txt").write_text("1 2 3\n")
    np.save(tmp_path / "wrong.npy", np.zeros((3, 4)))
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_device_exits_2(tmp_path, poses, capsys):
    targets = write_targets(tmp_path / "t.csv", poses)
    assert main(["solve", ROBOT, str(targets), "-o", str(tmp_path / "o.csv"), "--device", "cuda"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_interrupt_writes_finished_chunks(tmp_path, robot, poses, monkeypatch, capsys):
    calls = []

    def interrupted_solve(*args, **kwargs):
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        return solve(*args, **kwargs)

    monkeypatch.setattr(cli, "solve", interrupted_solve)
    out = tmp_path / "out.jsonl"
    targets = write_targets(tmp_path / "t.csv", poses)
    assert main(["solve", ROBOT, str(targets), "-o", str(out), "--batch-size", "2"]) == 130
    assert "wrote the 2 of 6 rows solved so far" in capsys.readouterr().err
    assert len(read_result(out, robot.dof)["q"]) == 2


def test_module_entry_point_non_tty_output_is_clean(tmp_path, poses):
    """``python -m ik_layer`` runs; with stderr a pipe, the progress bar writes no carriage returns."""
    targets = write_targets(tmp_path / "t.csv", np.repeat(poses, 4, axis=0))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ik_layer",
            "solve",
            ROBOT,
            str(targets),
            "-o",
            str(tmp_path / "o.csv"),
            "--batch-size",
            "3",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("ik-layer solve: 24/24 solved")


def processes_serving(port: int) -> set[int]:
    """Pids of the processes running ``ik_layer.server`` on ``port``, from their command lines in /proc."""
    pids = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            argv = cmdline.read_bytes().split(b"\0")
            if b"ik_layer.server" in argv and str(port).encode() in argv:
                pids.add(int(cmdline.parent.name))
    return pids


@pytest.mark.skipif(not Path("/proc/self/cmdline").is_file(), reason="finds the server's processes in /proc (Linux)")
def test_serve_is_the_server_and_sigterm_stops_it_with_status_0():
    """``ik-layer serve`` becomes the server; SIGTERM to it (how systemd, supervisord and container runtimes stop a
    service) stops the server gracefully within its grace period: status 0, no process left serving the port."""
    grace = 2
    flags = ["--robots", "planar3", "--max-iterations", "30", "--num-seeds", "2", "--shutdown-grace", str(grace)]
    # not captured: a server left behind would hold the pipe open, and reading it to its end would never end
    running = ServerProcess.start(flags, entry=("ik_layer", "serve"), ready_within=60, capture=False, cwd=ROOT)
    port = int(running.url.rsplit(":", 1)[1])
    try:
        serving = processes_serving(port)
        code, _ = running.stop(signal.SIGTERM, timeout=grace + 5)  # raises past the grace (and a margin)
        left = processes_serving(port)
    finally:
        for pid in processes_serving(port):  # a server that outlived ik-layer serve
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert code == 0  # the server's graceful stop
    assert serving == {running.process.pid}  # the server itself: no child to leave behind
    assert left == set()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


@pytest.mark.skipif(not (ROOT / "bench" / "report.py").is_file(), reason="bench/report.py is not in this checkout")
def test_bench_quick_writes_report_and_plots(tmp_path):
    runs = [
        {"clients": c, "batching": b, "throughput_rps": 100.0 * c, "p99_ms": 5.0 + c}
        for c in (1, 8)
        for b in (True, False)
    ]
    server_json = tmp_path / "server.json"
    server_json.write_text(json.dumps({"results": runs}))
    out = tmp_path / "report"
    assert main(["bench", "--quick", "--out", str(out), "--server-json", str(server_json)]) == 0
    report = (out / "REPORT.md").read_text()
    assert "## Server" in report and "![throughput](throughput_vs_batch.png)" in report
    plots = sorted(p.name for p in out.glob("*.png"))
    assert plots == ["error_histograms.png", "server_load.png", "success_vs_iterations.png", "throughput_vs_batch.png"]
    assert all((out / name).stat().st_size < 150_000 for name in plots)


# --------------------------------------------------------------------------- floating base

SOLO = "solo_description/robots/solo12.urdf"
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
FLOATING = ["--floating-base", "--ee-frames", ",".join(FEET)]


@pytest.fixture(scope="module")
def solo_urdf(erd_urdf) -> Path:
    return erd_urdf(SOLO)


@pytest.fixture(scope="module")
def solo(solo_urdf) -> ik_layer.Robot:
    return load_robot(solo_urdf, ee_frames=FEET, floating_base=True)


@pytest.fixture(scope="module")
def solo_q(solo) -> torch.Tensor:
    """(6, 19) configurations: joints inside their limits, bases anywhere in a 1 m box, in any orientation."""
    return random_configurations(solo, 6, torch.Generator().manual_seed(11))


def pinocchio_feet(urdf: Path, robot: ik_layer.Robot, q: np.ndarray) -> np.ndarray:
    """(n, F, 4, 4) world poses of the feet from Pinocchio's free-flyer model of ``urdf`` (its own quaternion
    normalisation: ``pin.normalize``)."""
    model = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer())
    data = model.createData()
    cols = [model.joints[model.getJointId(n)].idx_q for n in robot.joint_names]
    poses = np.empty((len(q), len(FEET), 4, 4))
    for i, qi in enumerate(q):
        q_pin = np.empty(model.nq)
        q_pin[:7], q_pin[cols] = qi[:7], qi[7:]
        q_pin = pin.normalize(model, q_pin)
        pin.framesForwardKinematics(model, data, q_pin)
        poses[i] = [data.oMf[model.getFrameId(f)].homogeneous for f in FEET]
    return poses


def write_q(path: Path, robot: ik_layer.Robot, q: np.ndarray) -> Path:
    """Configurations with the base first (``base.x ... base.qw``, then the joints) in ``path``'s format."""
    columns = q_columns(robot.joint_names, floating_base=True)
    if path.suffix == ".csv":
        return write_csv(path, columns, q.tolist())
    if path.suffix == ".npz":
        np.savez(path, q=q)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(dict(zip(columns, row, strict=True))) + "\n" for row in q.tolist()))
    return path


def read_feet(path: Path) -> np.ndarray:
    """(n, F, 4, 4) poses of an fk CSV output with FRAME.x ... FRAME.qw columns."""
    with path.open() as f:
        rows = list(csv.DictReader(f))
    pose = np.array([[[float(r[f"{frame}.{c}"]) for c in POSE_COLUMNS] for frame in FEET] for r in rows])
    return pose_to_matrix(torch.as_tensor(pose)).numpy()


@pytest.mark.parametrize("suffix", [".csv", ".npz", ".jsonl"])
def test_floating_base_fk_matches_pinocchio_free_flyer(tmp_path, solo, solo_urdf, solo_q, suffix):
    q = solo_q.numpy().copy()
    q[1, 3:7] *= 2.5  # a quaternion that is not unit: read as its rotation
    q_file = write_q(tmp_path / f"q{suffix}", solo, q)
    assert main(["fk", str(solo_urdf), str(q_file), "-o", str(tmp_path / "poses.csv"), *FLOATING]) == 0
    np.testing.assert_allclose(read_feet(tmp_path / "poses.csv"), pinocchio_feet(solo_urdf, solo, q), atol=1e-10)


def test_floating_base_solve_reaches_the_targets_in_pinocchio(tmp_path, solo, solo_urdf, solo_q, capsys):
    """Targets: the feet (full poses) at FK of random configurations with random bases; every answer's Pinocchio
    FK meets them, and the output names the base's columns."""
    q_file = write_q(tmp_path / "q.csv", solo, solo_q.numpy())
    targets, out = tmp_path / "targets.csv", tmp_path / "out.csv"
    assert main(["fk", str(solo_urdf), str(q_file), "-o", str(targets), *FLOATING]) == 0
    assert main(["solve", str(solo_urdf), str(targets), "-o", str(out), "--random-seed", "0", *FLOATING]) == 0
    assert "6/6 solved" in capsys.readouterr().err
    header = out.read_text().splitlines()[0].split(",")
    assert header[: 1 + solo.nq] == ["line", *q_columns(solo.joint_names, floating_base=True)]
    result = read_result(out, solo.nq)
    assert result["success"].all() and result["q"].shape == (6, 19)
    np.testing.assert_allclose(np.linalg.norm(result["q"][:, 3:7], axis=1), 1.0, atol=1e-12)
    wanted = pinocchio_feet(solo_urdf, solo, solo_q.numpy())
    err = pose_error(torch.as_tensor(wanted), torch.as_tensor(pinocchio_feet(solo_urdf, solo, result["q"])))
    assert err[..., :3].norm(dim=-1).max() <= TOL[0] and err[..., 3:].norm(dim=-1).max() <= TOL[1]
    # Warm starts carry the base too: started at the answers, nothing is left to do.
    npz = tmp_path / "out.npz"
    start = ["--warm-start", str(q_file), "--num-seeds", "1"]
    assert main(["solve", str(solo_urdf), str(targets), "-o", str(npz), *start, *FLOATING]) == 0
    with np.load(npz) as data:
        assert (data["iterations"] <= 1).all() and data["q_columns"].tolist()[:7] == list(BASE_COLUMNS)


def test_robots_on_a_floating_base(capsys):
    assert main(["robots", "--floating-base"]) == 0
    out = capsys.readouterr().out
    assert "panda: 13 dof" in out and " ".join(BASE_COLUMNS) in out


@pytest.mark.parametrize(
    ("command", "message"),
    [
        pytest.param(
            ["fk", "{urdf}", "{tmp}/joints.npy", *FLOATING],
            "(N, 19): the base pose (7), then 12 joints, got",
            id="npy-without-base",
        ),
        pytest.param(
            ["fk", "{urdf}", "{tmp}/joints.csv", *FLOATING],
            "header lacks column(s) base.x, base.y, base.z, base.qx",
            id="csv-without-base",
        ),
        pytest.param(
            ["fk", "{urdf}", "{tmp}/short.jsonl", *FLOATING], "line 1: 'q' has 12 values, expected 19", id="jsonl-short"
        ),
        pytest.param(
            ["fk", "{urdf}", "{tmp}/zero.csv", *FLOATING],
            "zero base quaternion (base.qx, base.qy, base.qz, base.qw",
            id="zero-quaternion",
        ),
        pytest.param(
            ["fk", "{urdf}", "{tmp}/zero.csv", "--ee-frames", "FL_FOOT"],
            "has the floating base's columns base.x",
            id="base-columns-without-flag",
        ),
        pytest.param(
            ["solve", "{urdf}", "{tmp}/targets.csv", "-o", "{tmp}/o.csv", "--warm-start", "{tmp}/zero.csv", *FLOATING],
            "invalid row(s) (NaN or non-numeric values, or a zero base quaternion",
            id="zero-quaternion-warm-start",
        ),
    ],
)
def test_floating_base_bad_input_exits_2_with_one_line(tmp_path, solo, solo_urdf, solo_q, command, message, capsys):
    q = solo_q.numpy().copy()
    np.save(tmp_path / "joints.npy", q[:, 7:])
    write_csv(tmp_path / "joints.csv", solo.joint_names, q[:, 7:].tolist())
    (tmp_path / "short.jsonl").write_text(json.dumps({"q": q[0, 7:].tolist()}) + "\n")
    write_csv(tmp_path / "targets.csv", pose_columns(FEET), matrix_to_pose(solo.fk(solo_q)).reshape(6, -1).tolist())
    q[2, 3:7] = 0.0  # file line 4
    write_q(tmp_path / "zero.csv", solo, q)
    argv = [a.format(tmp=tmp_path, urdf=solo_urdf) for a in command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    if "zero.csv" in argv[2] and "--floating-base" in argv:
        assert "line(s) 4;" in err


def test_floating_base_zero_quaternion_rows_skipped_on_request(tmp_path, solo, solo_urdf, solo_q, capsys):
    q = solo_q.numpy().copy()
    q[2, 3:7] = 0.0  # file line 4
    q_file = write_q(tmp_path / "q.csv", solo, q)
    out = tmp_path / "poses.csv"
    assert main(["fk", str(solo_urdf), str(q_file), "-o", str(out), "--on-invalid", "skip", *FLOATING]) == 0
    assert "skipped 1 invalid row(s)" in capsys.readouterr().err
    with out.open() as f:
        assert [int(r["line"]) for r in csv.DictReader(f)] == [2, 3, 5, 6, 7]
    np.testing.assert_allclose(read_feet(out), pinocchio_feet(solo_urdf, solo, q[[0, 1, 3, 4, 5]]), atol=1e-10)


def test_solve_with_a_scene_keeps_clear_of_it_and_writes_min_distance(tmp_path, robot, q_true, poses, capsys):
    from ik_layer.collision.cost import CollisionCost

    swallowed = poses[0, :3].tolist()  # the first target's flange inside a ball: it cannot be solved free
    scene = tmp_path / "scene.yaml"
    scene.write_text(
        "obstacles:\n"
        f"  - {{type: sphere, center: {swallowed}, radius: 0.12}}\n"
        "  - {type: box, pose: [0.0, 0.0, -0.3, 0, 0, 0, 1], size: [0.4, 0.4, 0.1]}\n"
    )
    targets = write_targets(tmp_path / "targets.csv", poses)
    out = tmp_path / "out.csv"
    assert main(["solve", ROBOT, str(targets), "-o", str(out), "--scene", str(scene), "--random-seed", "0"]) == 0
    with out.open() as f:
        rows = list(csv.DictReader(f))
    q = torch.tensor([[float(r[n]) for n in list(rows[0])[1 : 1 + robot.dof]] for r in rows], dtype=torch.float64)
    written = torch.tensor([float(r["min_distance"]) for r in rows], dtype=torch.float64)
    obstacles = ik_layer.collision.scene.load_scene(scene)
    cost = CollisionCost.of(robot, obstacles, ik_layer.SolveOptions.build())
    assert cost is not None
    torch.testing.assert_close(written, cost.min_distance(robot, q), atol=1e-12, rtol=0)
    success = np.array([r["success"] == "True" for r in rows])
    assert not success[0] and float(written[0]) < ik_layer.SolveOptions.build().collision_margin
    margin = ik_layer.SolveOptions.build().collision_margin
    assert bool((written[torch.as_tensor(success)] >= margin).all())
    assert_reaches(robot, q[torch.as_tensor(success)].numpy(), poses[success])


def test_solve_refuses_a_bad_scene_file_naming_the_entry(tmp_path, poses, capsys):
    scene = tmp_path / "scene.json"
    scene.write_text(json.dumps([{"type": "sphere", "center": [0, 0, 1], "radius": 0.1}, {"type": "box"}]))
    targets = write_targets(tmp_path / "targets.csv", poses)
    assert main(["solve", ROBOT, str(targets), "-o", str(tmp_path / "o.csv"), "--scene", str(scene)]) == 2
    assert "obstacles[1] (box) misses ['pose', 'size']" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("suffix", [".csv", ".npz", ".jsonl"])
def test_solve_writes_several_solutions_per_target_ranked(tmp_path, suffix):
    from ik_layer.core.solutions import _distance, _wrapping

    ur5e = ik_layer.load_robot("ur5e")
    generator = torch.Generator().manual_seed(4)
    poses = matrix_to_pose(ur5e.fk(ur5e.random_q((3,), generator=generator))).numpy()
    targets = write_targets(tmp_path / f"targets{suffix}", poses)
    start = ur5e.random_q((3,), generator=generator)
    seeds = tmp_path / "seeds.npy"
    np.save(seeds, start.numpy())
    out = tmp_path / f"out{suffix}"
    arguments = ["--num-solutions", "4", "--objective", "closest", "--warm-start", str(seeds), "--random-seed", "5"]
    assert main(["solve", "ur5e", str(targets), "-o", str(out), *arguments]) == 0
    result = read_result(out, ur5e.dof)
    lines = result["line"].reshape(3, 4)  # each target's line on its four rows
    assert (lines == lines[:, :1]).all() and len(set(lines[:, 0].tolist())) == 3
    q = torch.as_tensor(result["q"]).reshape(3, 4, ur5e.dof)
    success = torch.as_tensor(result["success"]).reshape(3, 4)
    assert int(success.sum()) >= 9
    for row in range(3):
        found = q[row][success[row]]
        assert_reaches(ur5e, found.numpy(), np.repeat(poses[row : row + 1], len(found), axis=0))
        away = _distance(found, start[row], _wrapping(ur5e))
        assert bool((away[1:] >= away[:-1]).all())  # closest first


def test_solve_goal_sets_answers_one_row_per_goals_and_names_the_goal(tmp_path, capsys):
    ur5e = ik_layer.load_robot("ur5e")
    poses = matrix_to_pose(ur5e.fk(ur5e.random_q((6,), generator=torch.Generator().manual_seed(6)))).numpy()
    poses[0::3, 0] += 5.0  # every row's first goal out of reach
    poses[4, 3] = np.nan  # row 1 holds an invalid goal: skipped whole
    targets = write_targets(tmp_path / "targets.csv", poses)
    out = tmp_path / "out.csv"
    arguments = ["--goal-set", "3", "--on-invalid", "skip", "--max-iterations", "60", "--random-seed", "7"]
    assert main(["solve", "ur5e", str(targets), "-o", str(out), *arguments]) == 0
    result = read_result(out, ur5e.dof)
    with out.open() as f:
        goal = [int(r["goal"]) for r in csv.DictReader(f)]
    assert result["line"].tolist() == [2] and goal == [1] and result["success"].tolist() == [True]
    assert_reaches(ur5e, result["q"], poses[1:2])
    assert "skipped 1 invalid row(s) of 3 goals of" in (err := capsys.readouterr().err)
    assert "starting at line(s) 5" in err  # the skipped row: its first goal's line
    uneven = write_targets(tmp_path / "uneven.csv", poses[:5])
    assert main(["solve", "ur5e", str(uneven), "-o", str(tmp_path / "o.csv"), "--goal-set", "3"]) == 2
    assert "do not make rows of --goal-set 3" in capsys.readouterr().err
