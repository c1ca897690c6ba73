"""A FastAPI route class for hot endpoints that take the request and their path's parameters and answer by themselves.

FastAPI handles each request of an :class:`~fastapi.routing.APIRoute` by solving the endpoint's dependencies,
validating its parameters and serialising its return value. An endpoint that reads its own body
(:func:`~ik_layer.server.body.read_json`), whose only parameters are the request and path segments, and that
returns a :class:`~starlette.responses.Response` needs none of it: :class:`DirectRoute` calls it as
``endpoint(request, **path_params)``. The OpenAPI document still comes from the endpoint's signature and the route's
arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

__all__ = ["DirectRoute"]


class DirectRoute(APIRoute):
    """An :class:`~fastapi.routing.APIRoute` whose endpoint is called with the request and the path's parameters (as
    strings) and returns its :class:`~fastapi.Response`.

    Raises:
        TypeError: at definition, an endpoint taking anything else (dependencies, query parameters, a body model,
            a path parameter of another type than ``str``).
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        # (called as the route is built, once its endpoint's parameters are known)
        dependant, endpoint = self.dependant, self.endpoint
        others = [
            *dependant.dependencies, *dependant.query_params, *dependant.header_params, *dependant.cookie_params,
            *dependant.body_params,
        ]  # fmt: skip
        request_name = dependant.request_param_name
        if others or request_name is None:
            raise TypeError(f"{self.name}: a DirectRoute's endpoint takes the request and path parameters only")
        if any(param.field_info.annotation is not str for param in dependant.path_params):
            raise TypeError(f"{self.name}: a DirectRoute's path parameters are strings")

        async def handle(request: Request) -> Response:
            return await endpoint(**{request_name: request}, **request.path_params)

        return handle
