"""``/v1/robots/{name}/scenes``: obstacles registered once under a name, for IK requests to name as their ``scene``."""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from ik_layer import NoCollisionModel, Obstacle, SolveOptions
from ik_layer.core.problem import check_collision
from ik_layer.server.body import openapi_body, read_json
from ik_layer.server.decode import obstacle_shapes, parse
from ik_layer.server.exceptions import NoCollisionSpheres, SceneNotFound, TooManyScenes
from ik_layer.server.schemas import ERROR_RESPONSES, SceneInfo, SceneRequest, ScenesResponse
from ik_layer.server.state import MAX_SCENES, Loaded, get_loaded

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["scenes"])

SceneName = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="letters, digits, '_', '.', '-'")]


@router.get("/robots/{name}/scenes", response_model=ScenesResponse, responses=ERROR_RESPONSES)
async def list_scenes(loaded: Annotated[Loaded, Depends(get_loaded)]) -> ScenesResponse:
    """The scenes registered for the robot, by name, with how many obstacles each holds."""
    return ScenesResponse(robot=loaded.robot.name, scenes=[_info(k, v) for k, v in loaded.scenes.items()])


@router.put(
    "/robots/{name}/scenes/{scene}",
    response_model=SceneInfo,
    responses={**ERROR_RESPONSES, 409: {"description": "the robot holds as many scenes as the server keeps"}},
    openapi_extra=openapi_body(SceneRequest),
)
async def put_scene(request: Request, scene: SceneName, loaded: Annotated[Loaded, Depends(get_loaded)]) -> SceneInfo:
    """Register (or replace) the scene ``scene``: IK requests naming it (``"scene": scene``) keep clear of its
    obstacles, besides their own. A robot keeps at most 64 scenes; the robot needs collision spheres."""
    obstacles = await read_json(request, lambda raw: _scene_obstacles(loaded, raw))
    if scene not in loaded.scenes and len(loaded.scenes) >= MAX_SCENES:
        raise TooManyScenes(
            f"{loaded.robot.name} holds {MAX_SCENES} scenes, the most this server keeps: delete one first", MAX_SCENES
        )
    loaded.scenes[scene] = obstacles
    return _info(scene, obstacles)


@router.delete("/robots/{name}/scenes/{scene}", response_model=SceneInfo, responses=ERROR_RESPONSES)
async def delete_scene(scene: SceneName, loaded: Annotated[Loaded, Depends(get_loaded)]) -> SceneInfo:
    """Forget the scene ``scene``; requests already queued with it keep its obstacles."""
    obstacles = loaded.scenes.pop(scene, None)
    if obstacles is None:
        raise SceneNotFound(f"{loaded.robot.name} has no scene {scene!r}")
    return _info(scene, obstacles)


def _scene_obstacles(loaded: Loaded, body: bytes) -> tuple[Obstacle, ...]:
    """The checked obstacles of a scene's body.

    Raises:
        NoCollisionSpheres: the robot has no collision spheres.
    """
    obstacles = obstacle_shapes(parse(SceneRequest, body).obstacles, ("body", "obstacles"))
    try:
        check_collision(loaded.robot, SolveOptions.build(), (obstacles,))
    except NoCollisionModel:
        raise NoCollisionSpheres(("body", "obstacles"), loaded.robot.name) from None
    return obstacles


def _info(name: str, obstacles: tuple[Obstacle, ...]) -> SceneInfo:
    return SceneInfo(name=name, obstacles=sum(math.prod(shape.batch) for shape in obstacles))
