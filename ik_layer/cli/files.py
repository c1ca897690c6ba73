"""Reading and writing the CLI's row files: targets, joint configurations, FK poses and IK results.

Three formats, chosen by the file suffix:

* ``.csv``: a header row naming the columns (``x,y,z,qx,qy,qz,qw`` for poses, the
  joint names for configurations); extra columns are ignored. With several end-effector
  frames, pose columns are prefixed by the frame: ``left.x, ..., left.qw, right.x, ...``.
  A floating base's pose leads a configuration: ``base.x, base.y, base.z, base.qx, base.qy,
  base.qz, base.qw``, then the joint names.
* ``.npy`` / ``.npz``: an (N, k) array (targets may also be (N, 4, 4) transforms);
  an ``.npz`` holds one array per field (``target`` or ``pose``, ``q``, ...).
* ``.jsonl`` / ``.ndjson``: one JSON object per line, with one key per column or one
  list-valued key per field (``{"pose": [...]}``, ``{"q": [...]}``).

Every row read keeps its 1-based source line (row number for NumPy files), so
invalid rows (NaN, infinite or non-numeric values, quaternions not of unit norm, zero base
quaternions) are reported where a person can find them.

A file that cannot be read as rows raises :class:`~ik_layer.exceptions.InputFileError` with a one-line
reason: missing, over :data:`MAX_INPUT_BYTES`, not UTF-8 text, malformed CSV, JSON or NumPy, or without
a single row.
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO

import numpy as np

from ik_layer.exceptions import InputFileError
from ik_layer.model.host import QUATERNION_NORM_TOLERANCE, matrix_to_pose

__all__ = [
    "BASE_COLUMNS",
    "MAX_INPUT_BYTES",
    "POSE_COLUMNS",
    "pose_columns",
    "q_columns",
    "Rows",
    "Table",
    "check_output",
    "drop_invalid",
    "format_lines",
    "invalid_poses",
    "invalid_q",
    "read_q",
    "read_targets",
    "write_csv",
    "write_table",
]

POSE_COLUMNS = ("x", "y", "z", "qx", "qy", "qz", "qw")
BASE_COLUMNS = tuple(f"base.{column}" for column in POSE_COLUMNS)  # a floating base's pose, first in a configuration
_ZERO_BASE_QUATERNION = 1e-9  # norms below this are zero, as in Robot.check_q
_CSV = (".csv",)
_NUMPY = (".npy", ".npz")
_JSONL = (".jsonl", ".ndjson")
_WRITABLE = (*_CSV, ".npz", *_JSONL)
_MAX_LISTED = 10
MAX_INPUT_BYTES = 256 * 1024**2  # largest row file read [bytes]: about 3 million CSV poses; split bigger inputs

OnInvalid = Literal["skip", "error"]


@dataclass(frozen=True)
class Rows:
    """Numeric rows read from a file.

    Attributes:
        values: (N, k) float64 values, NaN where a cell was missing or not a number.
        lines: (N,) int64 1-based source line of each row (row number for NumPy files).
        path: the file the rows came from.
    """

    values: np.ndarray
    lines: np.ndarray
    path: Path


@dataclass(frozen=True)
class Table:
    """Named per-row fields to write: each a (N,) or (N, k) array, k columns named in ``columns``."""

    fields: dict[str, np.ndarray]
    columns: dict[str, Sequence[str]]

    def flat_columns(self) -> list[str]:
        """Column names of the table flattened to scalars, in field order."""
        return [c for name in self.fields for c in self.columns.get(name, (name,))]

    def flat_values(self) -> list[list[object]]:
        """Rows of the flattened table as Python scalars (bools stay bools, ints stay ints)."""
        parts = [v.reshape(len(v), math.prod(v.shape[1:])) for v in self.fields.values()]
        return [[x for part in parts for x in part[i].tolist()] for i in range(self.num_rows)]

    @property
    def num_rows(self) -> int:
        """Number of rows."""
        return len(next(iter(self.fields.values())))


def pose_columns(frames: Sequence[str] | None = None) -> list[str]:
    """Column names of a pose: :data:`POSE_COLUMNS`, or ``frame.x ... frame.qw`` for each of several ``frames``."""
    if frames is None:
        return list(POSE_COLUMNS)
    return [f"{frame}.{column}" for frame in frames for column in POSE_COLUMNS]


def q_columns(joint_names: Sequence[str], floating_base: bool = False) -> list[str]:
    """Column names of a configuration: the joint names, after :data:`BASE_COLUMNS` with a floating base."""
    return [*(BASE_COLUMNS if floating_base else ()), *joint_names]


def read_targets(path: str | Path, frames: Sequence[str] | None = None) -> Rows:
    """Read end-effector targets as (N, 7) poses ``[x, y, z, qx, qy, qz, qw]`` ([m], unit quaternion), or with
    several ``frames`` (N, F * 7), the frames' poses one after the other.

    NumPy files hold (N, 7) / (N, 4, 4) arrays, or (N, F, 7) / (N, F, 4, 4) with frames; JSON lines a ``pose``
    of 7 or 16 values per frame, or one key per column.

    Raises:
        InputFileError: missing file, unknown suffix or wrong columns / shape.
    """
    path = _existing(path)
    columns = pose_columns(frames)
    if path.suffix in _NUMPY:
        array = _numpy_array(path, ("target", "pose"))
        if array.ndim >= 3 and array.shape[-2:] == (4, 4) and np.issubdtype(array.dtype, np.number):
            array = matrix_to_pose(array.astype(np.float64))
        if frames is not None and array.ndim == 3:
            array = array.reshape(len(array), -1)
        shape = "(N, 7) or (N, 4, 4)" if frames is None else f"(N, {len(frames)}, 7) or (N, {len(frames)}, 4, 4)"
        return _numpy_rows(path, array, len(columns), f"poses {shape}")
    if path.suffix in _JSONL:
        return _jsonl_rows(path, columns, ("target", "pose"))
    return _csv_rows(path, columns)


def read_q(path: str | Path, columns: Sequence[str]) -> Rows:
    """Read configurations as (N, nq) values, columns named by ``columns`` (see :func:`q_columns`): joint values
    [rad or m], after the base pose ``[x, y, z, qx, qy, qz, qw]`` when ``columns`` start with :data:`BASE_COLUMNS`.

    Raises:
        InputFileError: missing file, unknown suffix or wrong columns / shape; base columns in a file read
            without them (the robot has no floating base).
    """
    path = _existing(path)
    floating = tuple(columns[: len(BASE_COLUMNS)]) == BASE_COLUMNS
    if path.suffix in _NUMPY:
        parts = f": the base pose (7), then {len(columns) - len(BASE_COLUMNS)} joints" if floating else ""
        return _numpy_rows(path, _numpy_array(path, ("q",)), len(columns), f"configurations (N, {len(columns)}){parts}")
    # Without a floating base, base columns would be ignored (extra columns are): a missing --floating-base.
    stray = () if floating else BASE_COLUMNS
    if path.suffix in _JSONL:
        return _jsonl_rows(path, tuple(columns), ("q",), poses=False, stray=stray)
    return _csv_rows(path, tuple(columns), stray)


def invalid_poses(values: np.ndarray) -> np.ndarray:
    """(N,) bool: pose rows (N, 7 * F) with a non-finite value or a quaternion whose norm is not 1 (to within
    :data:`~ik_layer.model.host.QUATERNION_NORM_TOLERANCE`, as targets must be) in any of their F poses."""
    poses = values.reshape(len(values), -1, len(POSE_COLUMNS))
    finite = np.isfinite(poses).all(axis=(1, 2))
    norms = np.linalg.norm(np.where(np.isfinite(poses[..., 3:]), poses[..., 3:], 0.0), axis=-1)
    return ~finite | (abs(norms - 1) > QUATERNION_NORM_TOLERANCE).any(axis=1)


def invalid_q(values: np.ndarray, floating_base: bool = False) -> np.ndarray:
    """(N,) bool: configuration rows (N, nq) with a non-finite value or, with a floating base, a zero base
    quaternion (entries 3:7)."""
    invalid = ~np.isfinite(values).all(axis=1)
    if floating_base:
        quaternion = values[:, 3 : len(POSE_COLUMNS)]
        norms = np.linalg.norm(np.where(np.isfinite(quaternion), quaternion, 0.0), axis=1)
        invalid |= norms < _ZERO_BASE_QUATERNION
    return invalid


def drop_invalid(
    rows: Rows, invalid: np.ndarray, on_invalid: OnInvalid, reason: str = "NaN, non-numeric or zero quaternion"
) -> tuple[Rows, list[int]]:
    """Drop the rows marked ``invalid`` (``skip``) or refuse the file (``error``); ``reason`` says what makes a row
    invalid in the message.

    Returns:
        The valid rows and the source lines of the dropped ones.

    Raises:
        InputFileError: ``on_invalid="error"`` and some row is invalid; the message lists its lines.
    """
    bad = rows.lines[invalid].tolist()
    if bad and on_invalid == "error":
        raise InputFileError(
            f"{rows.path}: {len(bad)} invalid row(s) ({reason}) at line(s) "
            f"{format_lines(bad)}; fix them or pass --on-invalid skip"
        )
    keep = ~invalid
    return Rows(rows.values[keep], rows.lines[keep], rows.path), bad


def format_lines(lines: Sequence[int]) -> str:
    """``2, 5, 9`` or, past ten, the first ten and how many more."""
    shown = ", ".join(str(n) for n in lines[:_MAX_LISTED])
    return shown if len(lines) <= _MAX_LISTED else f"{shown} (and {len(lines) - _MAX_LISTED} more)"


def check_output(path: str | Path) -> None:
    """Refuse an output path early (before a long job): unknown suffix or missing directory.

    Raises:
        InputFileError: the suffix is not ``.csv``, ``.npz``, ``.jsonl``, ``.ndjson``, or the directory is missing.
    """
    path = Path(path)
    if path.suffix not in _WRITABLE:
        raise InputFileError(
            f"{path}: cannot write {path.suffix or 'files without a suffix'}; use .csv, .npz or .jsonl"
        )
    if not path.parent.is_dir():
        raise InputFileError(f"{path}: directory {path.parent} does not exist")


def write_table(path: str | Path, table: Table) -> None:
    """Write ``table`` to ``path`` as CSV, ``.npz`` (one array per field) or JSON lines.

    Raises:
        InputFileError: see :func:`check_output`.
    """
    path = Path(path)
    check_output(path)
    if path.suffix == ".npz":
        columns = {f"{k}_columns": np.array(v) for k, v in table.columns.items()}
        # numpy's stub: mypy checks the arrays against savez's keyword allow_pickle (a bool) too
        np.savez(path, **table.fields, **columns)  # type: ignore[arg-type]
    elif path.suffix in _JSONL:
        with path.open("w") as stream:
            for i in range(table.num_rows):
                stream.write(json.dumps({k: v[i].tolist() for k, v in table.fields.items()}) + "\n")
    else:
        with path.open("w", newline="") as stream:
            write_csv(stream, table)


def write_csv(stream: TextIO, table: Table) -> None:
    """Write ``table`` as CSV with a header row to an open text stream (e.g. stdout)."""
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(table.flat_columns())
    writer.writerows([_csv_cell(x) for x in row] for row in table.flat_values())


def _csv_cell(x: object) -> object:
    return repr(x) if isinstance(x, float) else x


def _existing(path: str | Path) -> Path:
    """``path``, a file of a known suffix no larger than :data:`MAX_INPUT_BYTES`."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{path}: no such file")
    if path.suffix not in _CSV + _NUMPY + _JSONL:
        raise InputFileError(f"{path}: unknown format {path.suffix or '(no suffix)'}; use .csv, .npy, .npz or .jsonl")
    size = path.stat().st_size
    if size > MAX_INPUT_BYTES:
        raise InputFileError(
            f"{path}: {size / 1024**2:.0f} MiB, more than the {MAX_INPUT_BYTES // 1024**2} MiB read at once; "
            "split it into smaller files"
        )
    return path


def _rows(path: Path, values: list[list[float]] | np.ndarray, lines: list[int] | np.ndarray, width: int) -> Rows:
    """The rows read from ``path``; a file without any is refused."""
    if len(values) == 0:
        raise InputFileError(f"{path}: no rows to read")
    return Rows(np.asarray(values, dtype=np.float64).reshape(-1, width), np.asarray(lines, dtype=np.int64), path)


def _text_lines(path: Path) -> Iterator[str]:
    """The lines of UTF-8 text file ``path`` (a byte-order mark skipped); other bytes raise InputFileError."""
    with path.open(encoding="utf-8-sig", newline="") as stream:
        try:
            yield from stream
        except UnicodeDecodeError as err:
            raise InputFileError(f"{path}: not UTF-8 text ({err.reason})") from None


def _numpy_array(path: Path, keys: Sequence[str]) -> np.ndarray:
    """The array of a ``.npy`` file, or of an ``.npz`` under one of ``keys`` (or its only array)."""
    try:
        with warnings.catch_warnings():  # a header of Python 2 (or mangled to look like one) reads the same
            warnings.filterwarnings("ignore", "Reading `.npy` or `.npz` file required additional header parsing")
            loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            return loaded
        with loaded:
            names = [k for k in keys if k in loaded.files]
            if not names and len(loaded.files) == 1:
                names = loaded.files
            if not names:
                held = ", ".join(loaded.files) or "no array"
                raise InputFileError(f"{path}: no array named {' or '.join(keys)}; it holds {held}")
            array = loaded[names[0]]
    except InputFileError:
        raise
    except Exception as err:  # a damaged file: NumPy's reader raises ValueError, EOFError, BadZipFile, SyntaxError...
        raise InputFileError(f"{path}: not a readable NumPy file ({type(err).__name__}: {err})") from None
    if not isinstance(array, np.ndarray):  # an archive member not saved by NumPy comes back as bytes
        raise InputFileError(f"{path}: not a readable NumPy file (array {names[0]!r} is not in NumPy's format)")
    return array


def _numpy_rows(path: Path, array: np.ndarray, width: int, expected: str) -> Rows:
    real = np.issubdtype(array.dtype, np.number) and not np.issubdtype(array.dtype, np.complexfloating)
    if array.ndim != 2 or array.shape[1] != width or not real:
        raise InputFileError(
            f"{path}: expected numeric {expected}, got an array of shape {array.shape} ({array.dtype})"
        )
    return _rows(path, array, np.arange(1, len(array) + 1), width)


def _csv_rows(path: Path, columns: Sequence[str], stray: Sequence[str] = ()) -> Rows:
    """Rows of a CSV file with a header naming ``columns`` (others ignored, unless it has every ``stray`` one)."""
    reader = csv.reader(_text_lines(path))
    try:
        header = [h.strip() for h in next(reader, [])]
        _refuse_stray(path, "its header", header, stray)
        missing = [c for c in columns if c not in header]
        if missing:
            got = _shorten(",".join(header)) or "an empty file"
            raise InputFileError(
                f"{path}: header lacks column(s) {', '.join(missing)}; expected {','.join(columns)} (got {got})"
            )
        index = [header.index(c) for c in columns]
        values, lines = [], []
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            values.append([_number(row[i]) if i < len(row) else math.nan for i in index])
            lines.append(reader.line_num)
    except csv.Error as err:
        raise InputFileError(f"{path}: line {reader.line_num} is not CSV ({err})") from None
    return _rows(path, values, lines, len(columns))


def _jsonl_rows(
    path: Path, columns: Sequence[str], keys: Sequence[str], *, poses: bool = True, stray: Sequence[str] = ()
) -> Rows:
    """Rows of a JSON-lines file (see :func:`_json_record`); ``poses``: the columns are poses, which may come as
    4x4 matrices; objects with every ``stray`` key are refused."""
    values, lines = [], []
    for line_number, line in enumerate(_text_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputFileError(f"{path}: line {line_number} is not JSON ({err.msg})") from None
        except (ValueError, RecursionError) as err:  # numbers of over 4300 digits, nesting deeper than Python's stack
            raise InputFileError(f"{path}: line {line_number} is not JSON we can read ({_shorten(str(err))})") from None
        if isinstance(record, dict):
            _refuse_stray(path, f"line {line_number}", record, stray)
        values.append(_json_record(path, line_number, record, columns, keys, poses=poses))
        lines.append(line_number)
    return _rows(path, values, lines, len(columns))


def _json_record(
    path: Path, line: int, record: object, columns: Sequence[str], keys: Sequence[str], *, poses: bool
) -> list[float]:
    """One JSON line as ``len(columns)`` floats: a list under one of ``keys`` (16 values per pose: a 4x4 matrix,
    when ``poses``) or one key per column."""
    if not isinstance(record, dict):
        raise InputFileError(f"{path}: line {line} is not a JSON object")
    key = next((k for k in keys if k in record), None)
    if key is not None:
        flat = np.asarray(record[key], dtype=object).reshape(-1).tolist()
        frames = len(columns) // len(POSE_COLUMNS)
        if poses and len(flat) == 16 * frames and len(columns) == len(POSE_COLUMNS) * frames:
            matrix = np.array([_number(x) for x in flat], dtype=np.float64).reshape(frames, 4, 4)
            finite = bool(np.isfinite(matrix).all())
            return matrix_to_pose(matrix).reshape(-1).tolist() if finite else [math.nan] * len(columns)
        if len(flat) != len(columns):
            raise InputFileError(f"{path}: line {line}: {key!r} has {len(flat)} values, expected {len(columns)}")
        return [_number(x) for x in flat]
    missing = [c for c in columns if c not in record]
    if missing:
        raise InputFileError(
            f"{path}: line {line} lacks key(s) {', '.join(missing)}; "
            f"expected {' or '.join(keys)} or {','.join(columns)}"
        )
    return [_number(record[c]) for c in columns]


def _refuse_stray(path: Path, where: str, names: Sequence[str] | dict[str, object], stray: Sequence[str]) -> None:
    """Raise if ``names`` hold every ``stray`` column: a floating base's pose read by a robot without one."""
    if stray and all(name in names for name in stray):
        raise InputFileError(
            f"{path}: {where} has the floating base's columns {','.join(stray)} but the robot has no floating base; "
            "pass --floating-base, or drop those columns"
        )


def _number(x: object) -> float:
    """``x`` as a float; NaN for anything that is not a number (empty cells, text, null)."""
    if isinstance(x, bool):
        return math.nan
    try:
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer too large for a float
        return math.nan


def _shorten(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters (a header or message of a huge line stays one readable line)."""
    return text if len(text) <= limit else text[:limit] + "..."
