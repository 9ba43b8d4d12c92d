"""Kubernetes `Status` errors: one exception type carrying the code, reason and message the real server
uses."""

from __future__ import annotations

from typing import Any, NamedTuple


class GroupResource(NamedTuple):
    """A resource named the way error messages name it (`leases.coordination.k8s.io`, `configmaps`)."""

    group: str
    resource: str

    @property
    def qualified(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


class ApiError(Exception):
    """An error answered to the client as a `Status` object with the same code and reason."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(gr: GroupResource, name: str) -> dict[str, Any]:
    return {"name": name, "group": gr.group, "kind": gr.resource}


def not_found(gr: GroupResource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{gr.qualified} "{name}" not found', _details(gr, name))


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(gr: GroupResource, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{gr.qualified} "{name}" already exists', _details(gr, name))


def conflict(gr: GroupResource, name: str, why: str) -> ApiError:
    message = f'Operation cannot be fulfilled on {gr.qualified} "{name}": {why}'
    return ApiError(409, "Conflict", message, _details(gr, name))


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(
    kind: str, group: str, name: str, field: str, detail: str, cause: str = "FieldValueInvalid"
) -> ApiError:
    message = f'{kind}{"." + group if group else ""} "{name}" is invalid: {field}: {detail}'
    causes = [{"reason": cause, "message": detail, "field": field}]
    return ApiError(422, "Invalid", message, {"name": name, "group": group, "kind": kind, "causes": causes})


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(gr: GroupResource, name: str, why: str) -> ApiError:
    message = f'{gr.qualified} "{name}" is forbidden: {why}'
    return ApiError(403, "Forbidden", message, _details(gr, name))


def method_not_allowed(method: str) -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", f"the server does not allow this method on the requested resource ({method})"
    )


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    message = (
        f'the body of the request was in an unknown format ("{content_type}") - '
        "accepted media types include: " + ", ".join(accepted)
    )
    return ApiError(415, "UnsupportedMediaType", message)


def not_acceptable(accepted: list[str]) -> ApiError:
    message = "only the following media types are accepted: " + ", ".join(accepted)
    return ApiError(406, "NotAcceptable", message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def unprocessable(message: str) -> ApiError:
    return ApiError(422, "", message)


def service_unavailable(message: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message)
