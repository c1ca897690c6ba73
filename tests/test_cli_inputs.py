"""Malformed input files on the command line: each is refused with exit 2 and one line on stderr, never a traceback.

A list of the files a person gets wrong (empty, header only, binary, truncated, another delimiter, too big), then
hypothesis mutating valid files of every format.
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ik_layer.cli.files
from ik_layer.cli.main import main

ROBOT = "planar3"  # joints joint1, joint2, joint3
CSV_Q = b"joint1,joint2,joint3\n0.1,0.2,0.3\n-0.1,0.0,0.5\n"
CSV_POSES = b"x,y,z,qx,qy,qz,qw\n0.5,0.2,0,0,0,0.2,0.98\n"
JSONL_Q = b'{"q": [0.1, 0.2, 0.3]}\n{"joint1": 0, "joint2": 0.1, "joint3": 0.2}\n'


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def assert_refused(code: int, err: str, message: str) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert message in err and "Traceback" not in err


# (file name, its bytes, what the message says). Each is read as the configurations of `fk`.
BAD_FILES = [
    ("empty.csv", b"", "header lacks column(s) joint1, joint2, joint3"),
    ("header_only.csv", b"joint1,joint2,joint3\n", "no rows to read"),
    ("header_and_blank_lines.csv", b"joint1,joint2,joint3\n\n , ,\n", "no rows to read"),
    ("latin1.csv", "joint1,joint2,joint3\n0.1,0.2,0.3 # é\n".encode("latin-1"), "not UTF-8 text"),
    ("binary.csv", bytes(range(256)) * 4, "not UTF-8 text"),
    ("nul.csv", b"joint1,joint2,joint3\n0.1,\x00,0.3\n", "1 invalid row(s) (NaN or non-numeric values) at line(s) 2"),
    ("semicolons.csv", b"joint1;joint2;joint3\n0.1;0.2;0.3\n", "header lacks column(s) joint1"),
    ("tabs.csv", b"joint1\tjoint2\tjoint3\n0.1\t0.2\t0.3\n", "header lacks column(s) joint1"),
    ("truncated.csv", CSV_Q[:-6], "invalid row(s)"),  # the last row lost its last value: NaN
    ("huge_field.csv", b"joint1,joint2,joint3\n" + b"1" * 200_000 + b",0,0\n", "is not CSV (field larger"),
    ("long_header.csv", b"a" * 100_000 + b"\n1\n", "(got aaaa"),
    ("empty.jsonl", b"", "no rows to read"),
    ("blank.jsonl", b"\n\n  \n", "no rows to read"),
    ("latin1.jsonl", '{"q": [0.1, 0.2, 0.3]} é\n'.encode("latin-1"), "not UTF-8 text"),
    ("truncated.jsonl", JSONL_Q[:-9], "line 2 is not JSON"),
    ("deep.jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n", "line 1 is not JSON we can read"),
    ("long_number.jsonl", b'{"q": [1' + b"0" * 5000 + b", 0, 0]}\n", "line 1 is not JSON we can read"),
    ("list.jsonl", b"[0.1, 0.2, 0.3]\n", "line 1 is not a JSON object"),
    ("wrong_count.jsonl", b'{"q": [0.1, 0.2]}\n', "'q' has 2 values, expected 3"),
    ("empty.npy", b"", "not a readable NumPy file"),
    ("binary.npy", bytes(range(256)), "not a readable NumPy file"),
    ("truncated.npy", npy(np.zeros((4, 3)))[:-20], "not a readable NumPy file"),
    ("no_rows.npy", npy(np.zeros((0, 3))), "no rows to read"),
    ("complex.npy", npy(np.zeros((2, 3), dtype=complex)), "got an array of shape (2, 3) (complex128)"),
    ("strings.npy", npy(np.array([["a", "b", "c"]])), "expected numeric configurations (N, 3)"),
    ("objects.npy", npy(np.array([[None, 1, 2]], dtype=object)), "not a readable NumPy file"),
    ("truncated.npz", npz(q=np.zeros((4, 3)))[:-30], "not a readable NumPy file"),
    ("empty_archive.npz", npz(), "no array named q; it holds no array"),
    ("two_arrays.npz", npz(a=np.zeros((1, 3)), b=np.zeros((1, 3))), "no array named q; it holds a, b"),
    ("objects.npz", npz(q=np.array([[None, 1, 2]], dtype=object)), "not a readable NumPy file"),
    ("zip_not_npz.npz", b"PK\x03\x04" + bytes(40), "not a readable NumPy file"),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_configuration_file_exits_2_with_one_line(tmp_path, capsys, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    assert_refused(*run(["fk", ROBOT, str(path)], capsys), message)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("header_only.csv", b"x,y,z,qx,qy,qz,qw\n", "no rows to read"),
        ("latin1.csv", CSV_POSES + "é".encode("latin-1"), "not UTF-8 text"),
        ("matrices.jsonl", b'{"pose": [[1, 0, 0, 0], [0, 1, 0, 0]]}\n', "'pose' has 8 values, expected 7"),
        ("no_rows.npy", npy(np.zeros((0, 4, 4))), "no rows to read"),
    ],
)
def test_a_bad_targets_file_exits_2_with_one_line(tmp_path, capsys, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    assert_refused(*run(["solve", ROBOT, str(path), "-o", str(tmp_path / "out.csv")], capsys), message)
    assert not (tmp_path / "out.csv").exists()


def test_a_bad_warm_start_file_exits_2_with_one_line(tmp_path, capsys):
    targets, starts = tmp_path / "t.csv", tmp_path / "start.csv"
    targets.write_bytes(CSV_POSES)
    starts.write_bytes(b"joint1,joint2,joint3\n")
    argv = ["solve", ROBOT, str(targets), "-o", str(tmp_path / "out.csv"), "--warm-start", str(starts)]
    assert_refused(*run(argv, capsys), "no rows to read")


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, capsys, monkeypatch):
    huge = tmp_path / "huge.csv"
    with huge.open("wb") as stream:  # sparse: no disk, and reading it would take seconds and gigabytes
        stream.truncate(ik_layer.cli.files.MAX_INPUT_BYTES + 1)
    assert_refused(*run(["fk", ROBOT, str(huge)], capsys), "split it into smaller files")
    # At the limit a file is read; one byte over, refused.
    monkeypatch.setattr(ik_layer.cli.files, "MAX_INPUT_BYTES", len(CSV_Q))
    (tmp_path / "q.csv").write_bytes(CSV_Q)
    assert main(["fk", ROBOT, str(tmp_path / "q.csv")]) == 0
    (tmp_path / "q.csv").write_bytes(CSV_Q + b"\n")
    assert_refused(*run(["fk", ROBOT, str(tmp_path / "q.csv")], capsys), "MiB read at once")


def test_a_missing_robot_file_says_so(tmp_path, capsys):
    (tmp_path / "q.csv").write_bytes(CSV_Q)
    code, err = run(["fk", str(tmp_path / "arm.urdf"), str(tmp_path / "q.csv")], capsys)
    assert_refused(code, err, f"'{tmp_path / 'arm.urdf'}': no such file")
    assert "unknown robot" not in err


def test_fk_with_every_row_skipped_writes_an_empty_table(tmp_path, capsys):
    path = tmp_path / "q.csv"
    path.write_bytes(b"joint1,joint2,joint3\nnan,0,0\n")
    assert main(["fk", ROBOT, str(path), "--on-invalid", "skip"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == ["line,x,y,z,qx,qy,qz,qw"]


# --------------------------------------------------------------------------- hypothesis

VALID = {
    ".csv": CSV_Q,
    ".jsonl": JSONL_Q,
    ".npy": npy(np.array([[0.1, 0.2, 0.3], [0.0, -0.4, 1.0]])),
    ".npz": npz(q=np.array([[0.1, 0.2, 0.3]])),
}


@st.composite
def mangled(draw: st.DrawFn) -> tuple[str, bytes]:
    """A valid file of some format, then cut, with bytes replaced, inserted or swapped for another format's."""
    suffix = draw(st.sampled_from(sorted(VALID)))
    data = bytearray(draw(st.sampled_from(list(VALID.values()))))
    for _ in range(draw(st.integers(0, 4))):
        where = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["cut", "replace", "insert"]))
        if action == "cut":
            del data[where:]
        elif action == "replace" and where < len(data):
            data[where] = draw(st.integers(0, 255))
        else:
            data[where:where] = draw(st.binary(max_size=8) | st.sampled_from([b",", b";", b"\n", b'"', b"\x00", b"["]))
    return suffix, bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=mangled())
def test_mangled_files_are_read_or_refused_in_one_line(tmp_path, capsys, case):
    suffix, content = case
    path = tmp_path / f"q{suffix}"
    path.write_bytes(content)
    code, err = run(["fk", ROBOT, str(path), "-o", str(tmp_path / "out.jsonl")], capsys)
    assert code in (0, 2), err
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("ik-layer fk: error: "), err
    else:
        rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
        assert rows and all(len(r["pose"]) == 7 for r in rows)


def test_an_archive_member_that_is_not_an_array_is_refused(tmp_path, capsys):
    path = tmp_path / "q.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("q.npy", b"not an array")
    assert_refused(*run(["fk", ROBOT, str(path)], capsys), "not a readable NumPy file")
