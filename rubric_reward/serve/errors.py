"""A request the service will not score: an HTTP status, a machine code and the field at fault."""

from __future__ import annotations

from typing import Any

__all__ = ["RequestError"]


class RequestError(ValueError):
    """Raised while reading a request; the app answers ``status`` with :meth:`to_dict` as JSON."""

    def __init__(self, status: int, code: str, field: str | None, message: str):
        super().__init__(f"{field}: {message}" if field else message)
        self.status, self.code, self.field, self.message = status, code, field, message

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "field": self.field, "message": self.message}}
