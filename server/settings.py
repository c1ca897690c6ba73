"""Server configuration: one ``Settings`` object from flags, ``IK_LAYER_*`` environment variables and defaults."""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Literal

import torch
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, CliApp, NoDecode, SettingsConfigDict

from ik_layer import OPTION_SPECS, SolveOptions, builtin_robots
from ik_layer.server.admission import SHARE, smallest_capacity
from ik_layer.server.options import option_model

__all__ = ["Settings", "parse_settings"]


if TYPE_CHECKING:  # the option fields are made at run time: mypy sees the base (Settings reads them by name)

    class _SolveDefaults(BaseSettings):
        """The solver options' settings (:func:`option_model`)."""

else:
    _SolveDefaults = option_model("SolveDefaults", BaseSettings, optional=False)


class Settings(_SolveDefaults):
    """Everything the server can be told; flags beat environment variables beat defaults.

    Robots are built-in names or ``path/to/robot.urdf:ee_frame`` (the frame is
    optional); the environment takes them comma-separated
    (``IK_LAYER_ROBOTS=ur5e,planar3``), the command line as ``--robots ur5e,planar3``.
    The solver options (``--num-seeds``, ``IK_LAYER_MAX_ITERATIONS``...) are the
    fields of :data:`ik_layer.OPTION_SPECS`, with its defaults and bounds; they
    serve requests that leave an option out (see :meth:`solve_options`).
    """

    model_config = SettingsConfigDict(
        env_prefix="IK_LAYER_",
        extra="forbid",
        frozen=True,  # read by every request (its solver options: :meth:`solve_options`, made once)
        cli_kebab_case=True,
        cli_prog_name="python -m ik_layer.server",
        cli_implicit_flags=True,
    )

    host: str = Field("127.0.0.1", description="interface to listen on")
    port: int = Field(8000, ge=0, le=65535, description="TCP port (0: any free port)")
    device: Literal["cpu", "cuda", "auto"] = Field("cpu", description="torch device; auto picks cuda when present")
    dtype: Literal["float32", "float64"] = Field("float64", description="floating dtype of the solver")
    robots: Annotated[list[str], NoDecode] = Field(
        default_factory=builtin_robots,
        min_length=1,
        description="built-in names, model files with ':ee_frame', or '@robots.json' (specs with ee_frames, "
        "floating_base, joints locked)",
    )
    terms: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="secondary cost terms to add, as module:NAME of an ik_layer.terms.SecondaryTerm (comma-separated)"
        ": IK requests may then name them in terms",
    )
    max_targets: int = Field(1024, ge=1, description="most targets (or configurations) in one request")
    max_slots: int = Field(
        4096,
        ge=smallest_capacity(),
        le=1 << 16,
        description="solver slots per robot (seeds in flight at once, all requests); "
        f"one request claims at most 1/{SHARE} of them",
    )
    block_iterations: int = Field(
        8, ge=1, le=256, description="LM iterations per engine step under load (4x when lightly loaded)"
    )
    max_requests_in_flight: int = Field(256, ge=1, description="requests solving at once per robot (1: unbatched)")
    queue_limit: int = Field(1024, ge=1, description="requests waiting or solving per robot before 503")
    max_queued_work: int = Field(
        1 << 31,
        ge=1,
        description="row-iterations (rows x frames x seeds x max_iterations) waiting or solving per robot",
    )
    max_trajectory_frames: int = Field(
        1000, ge=1, le=1_000_000, description="most frames (T) in one trajectory request's clip"
    )
    max_trajectories_in_flight: int = Field(
        2, ge=1, le=64, description="trajectory requests solving at once (all robots; one thread each)"
    )
    trajectory_queue_limit: int = Field(
        16, ge=0, description="trajectory requests waiting for a thread, beyond those solving, before 503"
    )
    timeout: float = Field(1.0, gt=0, le=600, description="default time limit of an IK request [s]")
    trajectory_timeout: float | None = Field(
        None, gt=0, le=600, description="default time limit of a trajectory request [s] (default: max_timeout)"
    )
    max_timeout: float = Field(10.0, gt=0, le=600, description="largest time limit a request may ask for [s]")
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="largest request body [bytes]")
    read_timeout: float = Field(10.0, gt=0, le=600, description="time to receive a request's headers and body [s]")
    max_connections: int = Field(1024, ge=1, description="open connections before new ones get 503")
    shutdown_grace: float = Field(10.0, ge=0, le=600, description="on SIGTERM, longest wait for requests in flight [s]")
    torch_threads: int = Field(
        1, ge=0, description="torch intra-op threads while serving (0: torch's default); IK tensors are small"
    )
    retry_after_s: int = Field(1, ge=1, description="Retry-After header of 503 answers [s]")
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"

    @field_validator("robots", "terms", mode="before")
    @classmethod
    def _split_lists(cls, value: object) -> object:
        """Accept ``"a,b"`` as well as a list."""
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list):
            return [part.strip() for item in value for part in str(item).split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _timeouts_in_order(self) -> Settings:
        for name in ("timeout", "trajectory_timeout"):
            value = getattr(self, name)
            if value is not None and value > self.max_timeout:
                raise ValueError(f"{name} ({value} s) must not exceed max_timeout ({self.max_timeout} s)")
        return self

    @field_validator("device")
    @classmethod
    def _cuda_present(cls, value: str) -> str:
        if value == "cuda" and not torch.cuda.is_available():
            raise ValueError(
                f"device 'cuda' asked for but torch sees no CUDA device ({cuda_missing_reason()}); use 'cpu' or 'auto'"
            )
        return value

    def solve_options(self) -> SolveOptions:
        """The solver options of a request that sets none (made once: every request asks)."""
        return self._solve_options

    @functools.cached_property
    def _solve_options(self) -> SolveOptions:
        return SolveOptions(**{name: getattr(self, name) for name in OPTION_SPECS})

    def torch_device(self) -> torch.device:
        """The device to load robots on (``auto``: cuda if available)."""
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)

    def torch_dtype(self) -> torch.dtype:
        """The torch dtype named by :attr:`dtype`."""
        return torch.float32 if self.dtype == "float32" else torch.float64


def cuda_missing_reason() -> str:
    """Why torch sees no CUDA device, in words a person can act on."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU build (the README's GPU section says how to get the CUDA one)"
    major = int(torch.version.cuda.split(".")[0])
    driver = " (CUDA 13 builds need driver >= 580)" if major >= 13 else ""
    return (
        f"torch {torch.__version__} (CUDA {torch.version.cuda}) finds no usable GPU: no NVIDIA driver, no device, "
        f"or a driver too old for this build{driver}"
    )


def parse_settings(argv: Sequence[str] | None = None) -> Settings:
    """Settings from command-line flags ``argv`` (default: ``sys.argv[1:]``) over the environment."""
    return CliApp.run(Settings, cli_args=list(sys.argv[1:] if argv is None else argv))
