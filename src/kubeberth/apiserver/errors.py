"""API errors as Kubernetes ``Status`` objects.

kubectl, client-go and lightkube read a failed request's body as a ``metav1.Status`` (code,
reason, message, details) and print its message; a bare text body would reach the user as
"unknown error". Every failure the server reports is an :class:`ApiError`, rendered once by the
HTTP layer.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request the server refuses, with the HTTP code and Kubernetes reason."""

    def __init__(self, code: int, reason: str, message: str, *,
                 details: dict[str, Any] | None = None, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(kind: str, name: str, group: str) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": kind}
    if name:
        out["name"] = name
    if group:
        out["group"] = group
    return out


def not_found(plural: str, name: str, group: str = "") -> ApiError:
    shown = f"{plural}.{group}" if group else plural
    return ApiError(404, "NotFound", f'{shown} "{name}" not found',
                    details=_details(plural, name, group))


def already_exists(plural: str, name: str, group: str = "") -> ApiError:
    shown = f"{plural}.{group}" if group else plural
    return ApiError(409, "AlreadyExists", f'{shown} "{name}" already exists',
                    details=_details(plural, name, group))


def conflict(plural: str, name: str, group: str, why: str) -> ApiError:
    shown = f"{plural}.{group}" if group else plural
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {shown} "{name}": {why}',
                    details=_details(plural, name, group))


def invalid(kind: str, name: str, group: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 Invalid: ``causes`` are (field path, message) pairs, as field.ErrorList."""
    text = ", ".join(f"{f}: {m}" if f else m for f, m in causes)
    details = _details(kind, name, group)
    details["causes"] = [{"reason": "FieldValueInvalid", "message": m, "field": f}
                         for f, m in causes]
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {text}', details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_large_rv(wanted: int, current: int) -> ApiError:
    """504 as upstream's cacher answers a resourceVersion it has not reached in time."""
    return ApiError(504, "Timeout", f"Timeout: Too large resource version: {wanted}, current: "
                    f"{current}", details={"causes": [{"reason": "ResourceVersionTooLarge",
                                                       "message": "Too large resource version"}],
                                           "retryAfterSeconds": 1}, retry_after=1)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")
