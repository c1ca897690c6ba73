"""Server settings from flags and IK_LAYER_* variables; robot specs with URDF paths and frames."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

import ik_layer
from ik_layer import FrameNotFound, IKLayerError, RobotNotFound
from ik_layer.engine import Engine
from ik_layer.robots import REGISTRY
from ik_layer.server.encode import robot_info
from ik_layer.server.run import serve
from ik_layer.server.served_robots import load_robots, parse_robot_spec, warm_up
from ik_layer.server.settings import Settings, parse_settings


def test_defaults_serve_the_builtin_robots_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("IK_LAYER_HOST", "IK_LAYER_PORT", "IK_LAYER_ROBOTS", "IK_LAYER_DEVICE"):
        monkeypatch.delenv(key, raising=False)
    settings = parse_settings([])
    assert (settings.host, settings.port, settings.device) == ("127.0.0.1", 8000, "cpu")
    assert settings.robots == sorted(REGISTRY)
    assert settings.torch_device() == torch.device("cpu") and settings.torch_dtype() == torch.float64


def test_environment_with_prefix_and_flags_over_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IK_LAYER_PORT", "9001")
    monkeypatch.setenv("IK_LAYER_ROBOTS", "ur5e, planar3")
    monkeypatch.setenv("IK_LAYER_TIMEOUT", "0.5")
    assert parse_settings([]).robots == ["ur5e", "planar3"]
    flags = ["--port", "9002", "--max-requests-in-flight", "1", "--dtype", "float32", "--robots", "panda"]
    settings = parse_settings(flags)
    assert (settings.port, settings.max_requests_in_flight, settings.timeout) == (9002, 1, 0.5)
    assert settings.robots == ["panda"] and settings.torch_dtype() == torch.float32


@pytest.mark.parametrize(
    "overrides",
    [
        {"port": 70000},
        {"max_requests_in_flight": 0},
        {"queue_limit": 0},
        {"timeout": 0},
        {"timeout": 20.0, "max_timeout": 10.0},
        {"max_slots": 100},
        {"read_timeout": -1},
        {"position_tolerance": 0},
        {"device": "tpu"},
        {"robots": []},
        {"unknown": 1},
    ],
)
def test_invalid_settings_are_refused(overrides: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Settings(**overrides)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal of cuda on a machine without CUDA")
def test_cuda_without_a_cuda_device_is_refused_up_front() -> None:
    with pytest.raises(ValidationError, match="no CUDA device"):
        Settings(device="cuda")
    assert Settings(device="auto").torch_device() == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback of auto on a machine without CUDA")
def test_auto_without_cuda_says_so_loudly_at_start(caplog: pytest.LogCaptureFixture) -> None:
    import anyio

    from ik_layer.server import create_app

    async def start_and_stop() -> None:
        app = create_app(Settings(robots=["planar3"], device="auto"))
        async with app.router.lifespan_context(app):
            assert app.state.ik.device == "cpu"

    with caplog.at_level("WARNING"):
        anyio.run(start_and_stop)
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "device auto" in r.getMessage()]
    assert len(warnings) == 1 and "serving on the CPU" in warnings[0].getMessage()
    assert "CPU build" in warnings[0].getMessage() or "no usable GPU" in warnings[0].getMessage()


def test_serve_reports_invalid_flags_with_exit_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve(["--queue-limit", "0"]) == 2
    assert "queue_limit" in capsys.readouterr().err


def test_robot_specs_take_a_urdf_path_and_frame() -> None:
    assert parse_robot_spec("ur5e") == ("ur5e", None)
    assert parse_robot_spec("/a/b/arm.urdf:tool0") == ("/a/b/arm.urdf", "tool0")
    assert parse_robot_spec("/a/b/arm.urdf") == ("/a/b/arm.urdf", None)
    assert parse_robot_spec("/a/b/arm.xml:site") == ("/a/b/arm.xml", "site")
    assert parse_robot_spec("arm.xacro:tool0") == ("arm.xacro", "tool0")


SOLO = "solo_description/robots/solo12.urdf"
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]


def test_load_robots_from_names_and_paths(tmp_path: Path) -> None:
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(REGISTRY["planar3"].urdf.read_text())
    robots = load_robots(["ur5e", f"{urdf}:tip"], torch.device("cpu"), torch.float32)
    assert robots["ur5e"].robot.dtype == torch.float32
    assert any(r.robot.ee_frame == "tip" for r in robots.values())
    with pytest.raises(IKLayerError, match="robot 'ur5e': a second robot named 'ur5e'; give each a name"):
        load_robots(["ur5e", "ur5e"], torch.device("cpu"), torch.float64)
    with pytest.raises(IKLayerError, match=re.escape(f"robot '{urdf}:nope': unknown frame 'nope'")) as info:
        load_robots([f"{urdf}:nope"], torch.device("cpu"), torch.float64)
    assert isinstance(info.value.__cause__, FrameNotFound)
    with pytest.raises(IKLayerError, match="robot 'kuka': unknown robot 'kuka'") as info:
        load_robots(["kuka"], torch.device("cpu"), torch.float64)
    assert isinstance(info.value.__cause__, RobotNotFound)


@pytest.mark.parametrize(
    ("robots", "content", "message"),
    [
        ("{tmp}/missing.urdf", None, "robot '{tmp}/missing.urdf': '{tmp}/missing.urdf': no such file"),
        ("{tmp}/arm.urdf:nope", None, "robot '{tmp}/arm.urdf:nope': unknown frame 'nope'; available: "),
        ("@{tmp}/missing.json", None, "robot spec file '{tmp}/missing.json': No such file or directory"),
        (
            "@{tmp}/robots.json",
            '["ur5e"]',
            """entry 1: 'ur5e' is a string; write an object such as {"source": "ur5e"}""",
        ),
        ("@{tmp}/robots.json", "{", "robot spec file '{tmp}/robots.json' is not JSON: Expecting property name"),
        ("@{tmp}/robots.json", '{"source": "ur5e"}', "must hold a JSON list of robot specs, got dict"),
        ("@{tmp}/robots.json", '[{"source": "ur5e"}, {"robot": "ur5e"}]', "entry 2: source: Field required"),
        ("@{tmp}/robots.json", '[{"source": "ur5e"}, 3]', "entry 2: entry: Input should be a valid dictionary"),
        ("@{tmp}/robots.json", '[{"source": "planar3", "ee_frame": "x"}]', "robots.json' entry 1: unknown frame 'x'"),
        ("@{tmp}/robots.json", b'["\xff"]', "robot spec file '{tmp}/robots.json' is not JSON: 'utf-8' codec"),
        (
            "@{tmp}/robots.json",
            '[{"source": "planar3", "collision": "{tmp}/none.yml"}]',
            "robots.json' entry 1: cannot read collision spheres {tmp}/none.yml: No such file",
        ),
        ("@{tmp}/robots.json", '[{"source": "planar3", "collision": 3}]', "entry 1: collision: Input should be a"),
    ],
)
def test_serve_names_a_bad_robot_spec_in_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], robots: str, content: str | bytes | None, message: str
) -> None:
    (tmp_path / "arm.urdf").write_text(REGISTRY["planar3"].urdf.read_text())
    if isinstance(content, str):
        (tmp_path / "robots.json").write_text(content.replace("{tmp}", str(tmp_path)))
    elif content is not None:
        (tmp_path / "robots.json").write_bytes(content)
    assert serve(["--robots", robots.replace("{tmp}", str(tmp_path)), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("python -m ik_layer.server: ") and message.replace("{tmp}", str(tmp_path)) in err


def test_a_spec_file_names_robots_and_locks_joints(tmp_path: Path, tiny_urdf: Path) -> None:
    specs = [
        {"source": str(tiny_urdf), "name": "held", "ee_frame": "tool", "locked": {"j_cont": 0.5, "j_prism": 0.02}},
        {"source": "planar3", "name": "arm"},
    ]
    (tmp_path / "robots.json").write_text(json.dumps(specs))
    robots = load_robots(["ur5e", f"@{tmp_path / 'robots.json'}"], torch.device("cpu"), torch.float64)
    assert list(robots) == ["ur5e", "held", "arm"]
    held = robots["held"].robot
    assert "j_cont" not in held.joint_names and "j_prism" not in held.joint_names
    info = robot_info(held, "auto")
    assert info.name == "held" and info.dof == held.dof == len(info.joint_names)
    assert info.locked["j_cont"] == pytest.approx(0.5) and info.locked["j_prism"] == pytest.approx(0.02)
    full_q = held.to_full_pinocchio_q(torch.zeros(held.dof, dtype=torch.float64))
    joint = held.full_model.joints[held.full_model.getJointId("j_prism")]
    assert float(full_q[joint.idx_q]) == pytest.approx(0.02)


PLANAR_SPHERES = Path(__file__).parent / "data" / "planar3_spheres.yml"  # 4 spheres on planar3's links


def test_a_spec_file_takes_collision_spheres_as_load_robot_does(tmp_path: Path) -> None:
    specs = [
        {"source": "planar3", "name": "bare"},
        {"source": "planar3", "name": "balls", "collision": str(PLANAR_SPHERES)},
        {"source": "panda"},
        {"source": "panda", "name": "no_spheres", "collision": None},
    ]
    (tmp_path / "robots.json").write_text(json.dumps(specs))
    robots = load_robots(["ur5e", f"@{tmp_path / 'robots.json'}"], torch.device("cpu"), torch.float64)
    sources = {name: served.collision for name, served in robots.items()}
    assert sources == {
        "ur5e": "auto",
        "bare": "auto",
        "balls": str(PLANAR_SPHERES),
        "panda": "auto",
        "no_spheres": None,
    }
    assert robots["bare"].robot.collision is None and robots["no_spheres"].robot.collision is None
    balls = robots["balls"].robot
    assert [link for link, _, _ in balls.collision_spheres] == ["link1", "link1", "link2", "link3"]
    assert [radius for _, _, radius in balls.collision_spheres] == pytest.approx([0.05, 0.05, 0.05, 0.04])
    shipped = ik_layer.load_robot("panda").collision
    assert shipped is not None and len(robots["panda"].robot.collision_spheres) == len(shipped)
    info = robot_info(balls, robots["balls"].collision)
    assert (info.collision, info.collision_spheres) == (str(PLANAR_SPHERES), 4)


@pytest.mark.parametrize(
    ("content", "match"),
    [("{", "robots.json"), ('{"source": "ur5e"}', "JSON list"), ('[{"source": "ur5e", "frame": "x"}]', "frame")],
)
def test_a_bad_spec_file_is_refused_naming_it(tmp_path: Path, content: str, match: str) -> None:
    (tmp_path / "robots.json").write_text(content)
    with pytest.raises(IKLayerError, match=match):
        load_robots([f"@{tmp_path / 'robots.json'}"], torch.device("cpu"), torch.float64)


def test_a_spec_file_loads_several_frames_a_floating_base_and_mimic_joints(tmp_path: Path, erd_urdf, tiny_urdf) -> None:
    """Robots the library solves load as specified; whether the engine takes them is checked when the worker
    starts (``Engine(robot)`` raises an IKLayerError for a robot it does not solve)."""
    mimic = tiny_urdf.read_text().replace(
        '<joint name="j_neg" type="revolute">', '<joint name="j_neg" type="revolute"><mimic joint="j_cont"/>', 1
    )
    (tmp_path / "mimic.urdf").write_text(mimic)
    talos = str(erd_urdf("talos_data/robots/talos_reduced.urdf"))
    specs = [
        {"source": str(erd_urdf(SOLO)), "ee_frames": FEET, "floating_base": True},
        {
            "source": talos,
            "name": "hands",
            "ee_frames": ["gripper_left_base_link", "gripper_right_base_link"],
            "locked": {"torso_1_joint": 0.2, "torso_2_joint": 0.1},
        },
        {"source": str(erd_urdf(SOLO)), "name": "one_foot", "ee_frames": ["FL_FOOT"]},
        {"source": str(tmp_path / "mimic.urdf"), "name": "mimic", "ee_frame": "tool"},
    ]
    (tmp_path / "robots.json").write_text(json.dumps(specs))
    robots = load_robots([f"@{tmp_path / 'robots.json'}"], torch.device("cpu"), torch.float64)
    assert list(robots) == ["solo", "hands", "one_foot", "mimic"]
    solo, hands = robots["solo"].robot, robots["hands"].robot
    assert solo.ee_frames == tuple(FEET) and solo.floating_base and (solo.nq, solo.dof) == (19, 18)
    assert hands.ee_frames == ("gripper_left_base_link", "gripper_right_base_link") and not hands.floating_base
    assert hands.nq == hands.dof == 14 and "torso_1_joint" not in hands.joint_names
    info = robot_info(hands, "auto")
    assert info.ee_frames == list(hands.ee_frames) and info.locked["torso_1_joint"] == pytest.approx(0.2)
    one_foot, mimic = robots["one_foot"].robot, robots["mimic"].robot
    assert one_foot.ee_frames is None and one_foot.ee_frame == "FL_FOOT"  # one name: ee_frame
    assert robot_info(one_foot, "auto").ee_frames == ["FL_FOOT"]
    assert mimic.mimic and "j_neg" not in robot_info(mimic, "auto").locked
    q = solo.random_q((3,), generator=torch.Generator().manual_seed(0))
    reference = ik_layer.load_robot(erd_urdf(SOLO), ee_frames=FEET, floating_base=True)
    torch.testing.assert_close(solo.fk(q), reference.fk(q), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"source": "planar3", "ee_frame": "tip", "ee_frames": ["tip"]}, "not both"),
        ({"source": "planar3", "ee_frames": []}, "ee_frames"),
        ({"source": "planar3", "ee_frames": "tip"}, "ee_frames"),
        ({"source": "planar3", "floating_base": "yes"}, "floating_base"),
        ({"source": "planar3", "ee_frames": ["tip", "tip"]}, "repeat"),
        ({"source": "planar3", "ee_frames": ["tip", "elbow"]}, "elbow"),
    ],
)
def test_bad_frame_specs_are_refused_naming_the_field(tmp_path: Path, spec: dict[str, object], match: str) -> None:
    (tmp_path / "robots.json").write_text(json.dumps([spec]))
    with pytest.raises(IKLayerError, match=match):
        load_robots([f"@{tmp_path / 'robots.json'}"], torch.device("cpu"), torch.float64)


def test_warm_up_runs_a_floating_base_robot_with_several_frames(erd_urdf) -> None:
    robot = ik_layer.load_robot(erd_urdf(SOLO), ee_frames=FEET, floating_base=True)
    warm_up(Engine(robot, capacity=64), ik_layer.SolveOptions(max_iterations=2))
