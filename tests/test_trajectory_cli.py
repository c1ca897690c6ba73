"""``ik-layer trajectory ROBOT clip.csv``: the library's answers, in chunks or not, the progress line, bad input."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ik_layer
from ik_layer.cli.files import POSE_COLUMNS, q_columns
from ik_layer.cli.main import main
from ik_layer.model.lie import matrix_to_pose
from ik_layer.trajectory.synthetic import joint_paths

DT = 0.01
FRAMES = 10
FIELDS = ("success", "position_error", "orientation_error", "max_step", "velocity_ratio", "bounded", "status")


@pytest.fixture(scope="module")
def ur5e() -> ik_layer.Robot:
    return ik_layer.load_robot("ur5e")


@pytest.fixture(scope="module")
def path(ur5e: ik_layer.Robot) -> torch.Tensor:
    return joint_paths(ur5e, clips=1, frames=FRAMES, dt=DT, generator=torch.Generator().manual_seed(0))[0]


def write_clip(where: Path, robot: ik_layer.Robot, q: torch.Tensor) -> Path:
    """A CSV clip of the FK poses of ``q`` (T, nq), one frame per row."""
    target = where / "clip.csv"
    with target.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(POSE_COLUMNS)
        writer.writerows([repr(x) for x in row] for row in matrix_to_pose(robot.fk(q)).tolist())
    return target


def write_q(where: Path, robot: ik_layer.Robot, q: torch.Tensor, name: str = "start.csv") -> Path:
    target = where / name
    with target.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(q_columns(robot.joint_names))
        writer.writerow([repr(x) for x in q.tolist()])
    return target


def run(*args: str) -> int:
    return main(["trajectory", *args])


def library(robot: ik_layer.Robot, clip: Path, **kwargs) -> ik_layer.TrajectoryResult:
    """The library's answer to the clip as the CLI reads it (the file's poses, float64)."""
    rows = np.loadtxt(clip, delimiter=",", skiprows=1)
    return ik_layer.solve_trajectory(robot, torch.from_numpy(rows), dt=DT, **kwargs)


@pytest.mark.parametrize(("chunk", "acceleration"), [(256, 0.0), (3, 0.0), (3, 10.0)])
def test_the_clip_equals_the_library_in_chunks_or_not(
    tmp_path: Path, ur5e: ik_layer.Robot, path: torch.Tensor, chunk: int, acceleration: float
) -> None:
    """Chunks of 3 frames, each warm-started at the last answer of the one before, give one call's answers
    (without acceleration; with it, the clip is one call); the generator runs on across chunks."""
    clip, start = write_clip(tmp_path, ur5e, path), write_q(tmp_path, ur5e, path[0])
    out = tmp_path / "q.npz"
    flags = ["--dt", str(DT), "--warm-start", str(start), "--chunk-size", str(chunk), "--random-seed", "5"]
    assert run("ur5e", str(clip), *flags, "--acceleration", str(acceleration), "-o", str(out)) == 0
    expected = library(
        ur5e, clip, warm_start=path[0], acceleration=acceleration, generator=torch.Generator().manual_seed(5)
    )
    written = np.load(out)
    assert written["q"].tolist() == expected.q.tolist()
    for name in FIELDS[:-1]:
        assert written[name].tolist() == getattr(expected, name).tolist(), name
    assert written["status"].tolist() == [ik_layer.ROW_STATUS[code] for code in expected.status.tolist()]
    assert written["line"].tolist() == list(range(2, FRAMES + 2))
    assert list(written["q_columns"]) == list(ur5e.joint_names)


def test_without_a_warm_start_chunks_follow_the_seeded_generator(tmp_path: Path, ur5e, path) -> None:
    clip = write_clip(tmp_path, ur5e, path)
    outputs = []
    for chunk in ("4", "100"):
        out = tmp_path / f"q{chunk}.npz"
        assert run("ur5e", str(clip), "--dt", str(DT), "--random-seed", "9", "--chunk-size", chunk, "-o", str(out)) == 0
        outputs.append(np.load(out)["q"])
    expected = library(ur5e, clip, generator=torch.Generator().manual_seed(9))
    assert outputs[0].tolist() == outputs[1].tolist() == expected.q.tolist()


def test_csv_on_stdout_has_a_row_per_frame(tmp_path: Path, ur5e, path, capsys: pytest.CaptureFixture[str]) -> None:
    clip = write_clip(tmp_path, ur5e, path)
    assert run("ur5e", str(clip), "--dt", str(DT), "--velocity-limit", "3.0", "--random-seed", "1") == 0
    captured = capsys.readouterr()
    rows = list(csv.reader(captured.out.splitlines()))
    assert rows[0] == ["line", *ur5e.joint_names, *FIELDS]
    assert len(rows) == FRAMES + 1
    expected = library(ur5e, clip, velocity_limit=3.0, generator=torch.Generator().manual_seed(1))
    assert [[float(x) for x in row[1 : 1 + ur5e.nq]] for row in rows[1:]] == expected.q.tolist()
    assert "ik-layer trajectory:" in captured.err and f"/{FRAMES} frames solved" in captured.err
    assert "\r" not in captured.err  # no progress line: stderr is not a terminal


def test_progress_shows_with_the_flag(tmp_path: Path, ur5e, path) -> None:
    clip = write_clip(tmp_path, ur5e, path)
    command = [sys.executable, "-m", "ik_layer", "trajectory", "ur5e", str(clip), "--dt", str(DT), "--chunk-size", "4"]
    done = subprocess.run(
        [*command, "--progress", "-o", str(tmp_path / "q.csv")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"{FRAMES}/{FRAMES}" in done.stderr and "frame" in done.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--dt", "0"], "--dt"),
        (["--dt", "0.01", "--velocity-limit", "0"], "--velocity-limit"),
        (["--dt", "0.01", "--velocity-limit", "1,2"], "velocity_limit"),
        (["--dt", "0.01", "--acceleration", "-1"], "--acceleration"),
        (["--dt", "0.01", "--on-invalid", "skip"], "skip a frame"),
    ],
)
def test_bad_arguments_exit_2_naming_them(
    tmp_path: Path, ur5e, path, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    clip = write_clip(tmp_path, ur5e, path)
    try:
        code = run("ur5e", str(clip), *flags)
    except SystemExit as exit_:  # argparse refuses a flag's value
        code = int(exit_.code or 0)
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_nan_frame_is_refused_with_its_line(tmp_path: Path, ur5e, path, capsys: pytest.CaptureFixture[str]) -> None:
    clip = write_clip(tmp_path, ur5e, path)
    lines = clip.read_text().splitlines()
    lines[4] = "nan," + lines[4].split(",", 1)[1]
    clip.write_text("\n".join(lines) + "\n")
    assert run("ur5e", str(clip), "--dt", str(DT)) == 2
    assert "line(s) 5" in capsys.readouterr().err
    start = write_q(tmp_path, ur5e, torch.stack([path[0], path[1]])[0], "two.csv")
    start.write_text(start.read_text() + start.read_text().splitlines()[1] + "\n")  # two configurations
    assert run("ur5e", str(write_clip(tmp_path, ur5e, path)), "--dt", str(DT), "--warm-start", str(start)) == 2
    assert "give one" in capsys.readouterr().err
