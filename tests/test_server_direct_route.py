"""DirectRoute: the endpoint gets the request and its path's strings, and only endpoints of that shape are taken."""

from __future__ import annotations

from typing import Annotated

import pytest
from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.testclient import TestClient

from ik_layer.server.direct_route import DirectRoute


def _app_with(router: APIRouter) -> FastAPI:
    app = FastAPI()
    app.include_router(router)
    return app


def test_endpoint_gets_the_request_and_path_parameters() -> None:
    router = APIRouter(route_class=DirectRoute)

    @router.post("/robots/{name}/echo/{scene}")
    async def echo(request: Request, name: str, scene: str) -> Response:
        return Response(f"{request.method} {name} {scene} ".encode() + await request.body())

    with TestClient(_app_with(router)) as client:
        answer = client.post("/robots/ur5e/echo/table", content=b"body")
    assert answer.status_code == 200
    assert answer.content == b"POST ur5e table body"


def test_openapi_still_documents_the_path_parameters() -> None:
    router = APIRouter(route_class=DirectRoute)

    @router.post("/robots/{name}/echo")
    async def echo(request: Request, name: str) -> Response:
        return Response(name)

    parameters = _app_with(router).openapi()["paths"]["/robots/{name}/echo"]["post"]["parameters"]
    assert [(p["name"], p["in"], p["schema"]["type"]) for p in parameters] == [("name", "path", "string")]


async def _robot(name: str) -> str:
    return name


@pytest.mark.parametrize("kind", ["query", "dependency", "int path", "no request"])
def test_other_endpoints_are_refused_at_definition(kind: str) -> None:
    router = APIRouter(route_class=DirectRoute)

    async def query(request: Request, name: str, limit: int) -> Response:
        return Response()

    async def dependency(request: Request, robot: Annotated[str, Depends(_robot)]) -> Response:
        return Response()

    async def int_path(request: Request, name: int) -> Response:
        return Response()

    async def no_request(name: str) -> Response:
        return Response()

    endpoint = {"query": query, "dependency": dependency, "int path": int_path, "no request": no_request}[kind]
    with pytest.raises(TypeError, match="DirectRoute"):
        router.add_api_route("/robots/{name}/x", endpoint, methods=["POST"])
